"""MobileNetV3 small and large (Howard et al. 2019) in plain PyTorch, random weights, real size.

The layer tables are the paper's (and torchvision's): inverted residual blocks of a 1x1 expansion, a
depthwise k x k convolution, an optional squeeze-and-excite (global pool, 1x1 reduce, ReLU, 1x1
expand, HardSigmoid gate) and a 1x1 projection, with ReLU or HardSwish; a HardSwish stem and head.
Input (batch, 3, H, W) float32, H and W multiples of 32 (224 for the benchmarks) -> (batch, 1000) logits.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import nn

from .seeding import randomize_batchnorm, seeded


class Block(NamedTuple):
    """One inverted residual block: kernel, expanded channels, output channels, SE, HardSwish, stride."""

    kernel: int
    expanded: int
    out: int
    se: bool
    hardswish: bool
    stride: int


# (kernel, expanded, out, squeeze-excite, HardSwish, stride), after a 16-channel stem.
LARGE = [Block(*b) for b in [
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
]]
SMALL = [Block(*b) for b in [
    (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
]]
HIDDEN = {"large": 1280, "small": 1024}  # width of the classifier's hidden Linear


def make_divisible(value: float, divisor: int = 8) -> int:
    """Rounds channel counts to a multiple of 8 (never down by more than 10%), as the reference does."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn_act(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1,
                act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    # No conv bias: the BatchNorm after it has its own shift.
    layers = [nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    return nn.Sequential(*layers, *([act()] if act else []))


class SqueezeExcite(nn.Module):
    """Channel gate: x * HardSigmoid(fc2(ReLU(fc1(mean over H, W of x))))."""

    def __init__(self, channels: int):
        super().__init__()
        squeezed = make_divisible(channels // 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """1x1 expand (skipped when it would not widen), depthwise k x k, optional SE, 1x1 project;
    the input is added back when the shape does not change."""

    def __init__(self, c_in: int, b: Block):
        super().__init__()
        act = nn.Hardswish if b.hardswish else nn.ReLU
        layers: list[nn.Module] = []
        if b.expanded != c_in:
            layers.append(conv_bn_act(c_in, b.expanded, 1, act=act))
        layers.append(conv_bn_act(b.expanded, b.expanded, b.kernel, b.stride, groups=b.expanded, act=act))
        if b.se:
            layers.append(SqueezeExcite(b.expanded))
        layers.append(conv_bn_act(b.expanded, b.out, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = b.stride == 1 and c_in == b.out

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    """x (batch, 3, H, W) float32 -> logits (batch, num_classes)."""

    def __init__(self, blocks: list[Block], hidden: int, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [conv_bn_act(3, 16, 3, stride=2, act=nn.Hardswish)]
        c = 16
        for b in blocks:
            layers.append(InvertedResidual(c, b))
            c = b.out
        last = 6 * c  # the head widens the last block's output six times
        layers.append(conv_bn_act(c, last, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last, hidden), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(hidden, num_classes))
        self._init_weights()

    def _init_weights(self) -> None:
        # The reference initialisation: He (fan-out) convolutions, small normal classifier weights.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


def _build(blocks: list[Block], hidden: int) -> MobileNetV3:
    with seeded(0):
        model = MobileNetV3(blocks, hidden)
        randomize_batchnorm(model)
    return model.eval()


def build_large() -> MobileNetV3:
    """MobileNetV3-large (5.5 M parameters) in eval mode, the same random weights on every call."""
    return _build(LARGE, HIDDEN["large"])


def build_small() -> MobileNetV3:
    """MobileNetV3-small (2.5 M parameters) in eval mode, the same random weights on every call."""
    return _build(SMALL, HIDDEN["small"])
