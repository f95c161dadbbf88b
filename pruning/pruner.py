"""Pruning one model at given per-group ratios with torch-pruning, and the ratio that reaches a speed-up.

Ratios are per group of `Structure.groups` (a fraction of its channels, heads or feed-forward width removed);
channel counts are rounded to a multiple of `round_to` (SIMD-friendly widths for OptimEP's kernels). Importance:
importance.py.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import torch
import torch_pruning as tp
from torch import nn

from .errors import PruneError
from .importance import importance_of
from .structure import Group, Structure, num_heads

MAX_RATIO = 0.9  # no group loses more than this share of its channels or heads


def macs_and_params(model: nn.Module, args: tuple) -> tuple[int, int]:
    """Multiply-accumulates of the convolution and linear layers on `args`, and the parameter count."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        macs, params = tp.utils.count_ops_and_params(model, args)
    return int(macs), int(params)


def max_ratio(group: Group, round_to: int | None) -> float:
    """The largest ratio that leaves `group` at least one head, or round_to channels (torch-pruning rounds down:
    beyond this it would leave none and skip the group, so compute would rise again with the ratio)."""
    keep = 1 if group.kind == "heads" else (round_to or 1)
    return max(0.0, min(MAX_RATIO, 1 - keep / group.width))


def prune_model(model: nn.Module, args: tuple, structure: Structure, ratios: list[float], importance: str,
                round_to: int | None, output_transform: Callable, gradients: Callable[[nn.Module], None] | None = None) -> None:
    """Prunes `model` in place: group i of `structure` loses ratios[i] of its channels (heads for an attention
    group). gradients(model) fills .grad for the Taylor importance (importance.taylor_gradients)."""
    if len(ratios) != len(structure.groups):
        raise ValueError("one ratio per group")
    modules = dict(model.named_modules())
    channel_ratios, head_ratios = {}, {}
    for group, ratio in zip(structure.groups, ratios):
        ratio = min(max(ratio, 0.0), max_ratio(group, round_to))
        for name in group.names:
            channel_ratios[modules[name]] = ratio  # an attention group needs it too: it prunes nothing at 0
            if group.kind == "heads":
                head_ratios[modules[name]] = ratio
    attention = structure.attention_in(model)
    if importance == "taylor":
        if gradients is None:
            raise ValueError("the Taylor importance needs gradients")
        model.zero_grad()
        gradients(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pruner = tp.pruner.MetaPruner(
            model, args, importance=importance_of(importance), pruning_ratio=0.0, pruning_ratio_dict=channel_ratios,
            ignored_layers=structure.ignored_in(model), round_to=round_to, num_heads=num_heads(attention),
            prune_num_heads=bool(attention), prune_head_dims=False, head_pruning_ratio=0.0,
            head_pruning_ratio_dict=head_ratios, output_transform=output_transform)
        pruner.step()
    for a in attention:
        a.update()
    model.zero_grad(set_to_none=True)


def pruned_copy(model: nn.Module, *rest, **kwargs) -> nn.Module:
    """prune_model on a deep copy; `model` stays as it was."""
    twin = copy.deepcopy(model)
    prune_model(twin, *rest, **kwargs)
    return twin


def scale_for_macs(model: nn.Module, args: tuple, structure: Structure, weights: list[float], goal_macs: float,
                   round_to: int | None, output_transform: Callable, say=None) -> tuple[float, int]:
    """The smallest s (to 1/64) for which ratios s * weights[i] (capped at MAX_RATIO) leave at most goal_macs; and
    those MACs. Magnitude importance decides the channels here (the MACs do not depend on which go)."""
    def macs_at(scale: float) -> int:
        twin = pruned_copy(model, args, structure, [scale * w for w in weights], "magnitude", round_to, output_transform)
        return macs_and_params(twin, args)[0]

    top = MAX_RATIO / max(weights)
    best = macs_at(top)
    if best > goal_macs:
        raise PruneError(f"even at the largest ratio ({MAX_RATIO:.0%} of every prunable group) the model keeps "
                         f"{best / 1e9:.3g} GMACs, above the {goal_macs / 1e9:.3g} GMACs asked for: ask for a smaller "
                         f"speed-up")
    low, high, found = 0.0, top, best
    for _ in range(6):
        middle = (low + high) / 2
        macs = macs_at(middle)
        if say:
            say(f"speed-up search: scale {middle:.3f} -> {macs / 1e9:.3g} GMACs (goal {goal_macs / 1e9:.3g})")
        if macs <= goal_macs:
            high, found = middle, macs
        else:
            low = middle
    return high, found
