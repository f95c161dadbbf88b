"""Deterministic weights for zoo factories without disturbing the caller's random state."""

from __future__ import annotations

import contextlib

import torch
from torch import nn


@contextlib.contextmanager
def seeded(seed: int):
    """Runs the block with torch's CPU generator seeded; the caller's generator state is restored.

    Factories build their modules inside this so that every call gives the same weights, and a
    test that seeds torch itself is not affected by building a zoo model in between.
    """
    # devices=[]: only the CPU generator; touching CUDA generators would initialise CUDA.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def he_init(model: nn.Module) -> None:
    """Re-draws every Conv2d and Linear weight of `model` with He (fan-in) scaling and zero biases, and gives its
    BatchNorm2d layers non-trivial statistics (randomize_batchnorm), in place.

    For architectures whose library initializer lets activations vanish with depth: transformers' MobileNetV2
    (normal weights of std 0.02) ends in logits of ~1e-21 and EfficientNet-B0's are exactly 0. A network like
    that measures nothing (int8 accuracy of a constant output) and its float timings are those of subnormal
    arithmetic, which costs Intel CPUs ~100x. Trained networks keep activations near unit scale; this does too.
    Call inside seeded() for fixed values."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
    randomize_batchnorm(model)


def randomize_batchnorm(model: nn.Module) -> None:
    """Gives every BatchNorm2d of `model` non-trivial statistics and affine parameters (in place).

    Fresh BatchNorm is the identity in eval mode (mean 0, var 1, scale 1, shift 0), which would
    let a broken BN export or Conv+BN fold pass unnoticed; call inside seeded() for fixed values.
    """
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.normal_(0.0, 0.2)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.normal_(0.0, 0.2)
