"""Per-group pruning ratios from a sensitivity search: each group pruned alone, the output change measured, and
the less sensitive groups given more of the cut (as `optim quantize --target` keeps the most sensitive nodes in
float).

A group's sensitivity is 1 - the per-sample cosine (averaged over the samples) of the output that moves most when
only that group loses `probe` of its channels (heads), on a few training samples. The groups are ranked, and the ratio weights run linearly from
1.5 (least sensitive) to 0.5 (most); prune.py then scales them to the compute the user asked for.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from optim.optimizer.quantization.accuracy import compare_outputs

from .pruner import pruned_copy
from .structure import Structure

WEIGHT_SPREAD = 0.5  # weights span 1 - spread .. 1 + spread


def group_sensitivities(model: nn.Module, args: tuple, probe_args: tuple, structure: Structure, probe: float,
                        round_to: int | None, output_transform: Callable, outputs: Callable, say=None) -> list[float]:
    """1 - lowest output cosine per group, each pruned alone by `probe` on probe_args. outputs(model, args) -> the
    flat output tensors."""
    with torch.no_grad():
        reference = outputs(model, probe_args)
    result = []
    n = len(structure.groups)
    for i, group in enumerate(structure.groups):
        ratios = [0.0] * n
        ratios[i] = probe
        twin = pruned_copy(model, args, structure, ratios, "magnitude", round_to, output_transform)
        with torch.no_grad():
            got = outputs(twin, probe_args)
        worst = min(compare_outputs("", "", [r.numpy()], [g.numpy()], False).mean_cosine
                    for r, g in zip(reference, got))
        result.append(1.0 - worst)
        if say and (i + 1) % max(1, n // 8) == 0:
            say(f"sensitivity: {i + 1}/{n} groups measured")
    return result


def ratio_weights(sensitivities: list[float]) -> list[float]:
    """Ranks -> weights from 1 + WEIGHT_SPREAD (least sensitive) to 1 - WEIGHT_SPREAD (most sensitive)."""
    n = len(sensitivities)
    if n < 2:
        return [1.0] * n
    order = np.argsort(np.asarray(sensitivities), kind="stable")
    weights = np.empty(n)
    weights[order] = 1 + WEIGHT_SPREAD - 2 * WEIGHT_SPREAD * np.arange(n) / (n - 1)
    return weights.tolist()
