"""The digits MLP of the version-1 examples, as a PyTorch module trained with AdamW.

    python -m agents job build --model examples/models/digits_mlp.py:make_model \
        --dataset sklearn-digits/train --optimizer adamw --lr 0.003 --weight-decay 0.01 \
        --batch 32 --steps 300 --checkpoint-every 100 --seed 1 --out digits-mlp-adamw.json
"""

from torch import nn


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Linear(64, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )
