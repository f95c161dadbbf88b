"""The zoo's `cnn`: a small ResNet-style network on 3x32x32 images, BatchNorm kept as modules."""

from __future__ import annotations

from torch import nn

from .seeding import randomize_batchnorm, seeded


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int) -> list[nn.Module]:
    # No conv bias: the BatchNorm after it has its own shift, as in ResNet.
    return [nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, bias=False), nn.BatchNorm2d(c_out)]


class BasicBlock(nn.Module):
    """Conv3x3-BN-ReLU-Conv3x3-BN plus the skip, then ReLU.

    With stride 2 or a channel change the skip goes through a 1x1 conv + BN projection.
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(c_in, c_out, 3, stride)
        self.conv2, self.bn2 = _conv_bn(c_out, c_out, 3, 1)
        self.relu = nn.ReLU()
        needs_projection = stride != 1 or c_in != c_out
        self.shortcut = nn.Sequential(*_conv_bn(c_in, c_out, 1, stride)) if needs_projection else nn.Identity()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """x (batch, 3, 32, 32) float32 -> logits (batch, 10)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 16, 3, 1), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block1 = BasicBlock(16, 16, stride=1)
        self.block2 = BasicBlock(16, 32, stride=2)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.pool(self.stem(x))
        return self.head(self.block2(self.block1(x)))


def build() -> SmallResNet:
    """The zoo's cnn in eval mode, with the same random weights and BN statistics on every call."""
    with seeded(0):
        model = SmallResNet()
        randomize_batchnorm(model)
    return model.eval()
