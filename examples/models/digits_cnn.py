"""A small convolutional net for scikit-learn's 8x8 digits (conv, max-pool, ReLU, linear).

Build its job spec (SGD with momentum):

    python -m agents job build --model examples/models/digits_cnn.py:make_model \
        --dataset sklearn-digits/train --optimizer sgd --lr 0.05 --momentum 0.9 \
        --batch 32 --steps 1000 --checkpoint-every 100 --seed 1 --out digits-cnn.json
"""

from torch import nn


class DigitsCNN(nn.Module):
    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),  # 8x8
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.AvgPool2d(2),  # 2x2
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * channels * 4, classes))

    def forward(self, x):
        return self.head(self.features(x))


def make_model() -> nn.Module:
    return DigitsCNN()
