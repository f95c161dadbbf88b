"""Calibration samples (the model's inputs, as the user gives them) -> input batches of one captured graph.

A sample is a tuple of the captured function's positional arguments (after `self`), a dict by argument
name, or a single tensor. Only a graph whose inputs are all arguments of the function Dynamo captured
(the first graph of a forward) can be reached; a graph after a graph break takes values computed
in between, so it gets None and stays float32 (its report says so)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .capture import Plan
from .options import OptionsError
from .tensors import to_numpy

RESUME_PREFIX = "torch_dynamo_resume_in_"  # how Dynamo names the functions that continue after a graph break


def _as_arguments(sample, names: list[str], i: int) -> dict:
    if isinstance(sample, Mapping):
        return dict(sample)
    if isinstance(sample, torch.Tensor):
        sample = (sample,)
    if not isinstance(sample, (tuple, list)):
        raise OptionsError(f"calib sample {i} is a {type(sample).__name__}; give a tuple of the model's inputs, "
                           "a dict by argument name or a tensor")
    if len(sample) > len(names):
        raise OptionsError(f"calib sample {i} has {len(sample)} inputs; the model's forward takes "
                           f"{len(names)} ({', '.join(names)})")
    return dict(zip(names, sample))


def graph_batches(plan: Plan, frame_name: str, frame_args: list[str], samples: list) -> list[dict] | None:
    """One dict per sample, keyed by the graph's ONNX input names, or None when the samples cannot reach it."""
    if frame_name.startswith(RESUME_PREFIX):
        return None
    if any(a is None for a in plan.arguments):
        return None
    batches = []
    for i, sample in enumerate(samples):
        by_name = _as_arguments(sample, frame_args, i)
        missing = [a for a in plan.arguments if a not in by_name]
        if missing:
            raise OptionsError(f"calib sample {i} has no value for the model's input {missing[0]!r}")
        batches.append({name: to_numpy(by_name[a]) for name, a in zip(plan.names, plan.arguments)})
    return batches
