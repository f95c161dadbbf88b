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
