"""Deterministic weights for zoo factories without disturbing the caller's random state."""

from __future__ import annotations

import contextlib

import torch


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
