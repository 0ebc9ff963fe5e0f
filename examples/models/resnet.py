"""A small ResNet for scikit-learn's 8x8 digits: BatchNorm, residual blocks (one with a strided
3x3 convolution and a strided 1x1 projection shortcut), global average pooling and dropout.

Trained with SGD with Nesterov momentum and a cosine decay:

    python -m agents job build --model examples/models/resnet.py:make_model \
        --dataset sklearn-digits/train --optimizer nesterov --lr 0.05 --momentum 0.9 \
        --decay cosine --batch 32 --steps 600 --checkpoint-every 100 --seed 1 --out resnet.json

BatchNorm trains on each batch's statistics and updates its running mean and variance every step
(committed state beside the parameters); evaluation reads them. Dropout draws its masks from the
protocol's committed random stream (PROTOCOL §2.6, `uniform`), so every solver and the chain
draw the same ones.
"""

from torch import nn
from torch.nn import functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, width: int = 16, classes: int = 10, dropout: float = 0.1):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.layer1 = BasicBlock(width, width, 1)  # 8x8
        self.layer2 = BasicBlock(width, 2 * width, 2)  # 4x4
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(self.dropout(self.pool(x).flatten(1)))


def make_model() -> nn.Module:
    return ResNet()


def make_tiny() -> nn.Module:
    """The smallest model with every layer type (the dispute tests' job)."""
    return ResNet(width=4)
