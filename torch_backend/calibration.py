"""Calibration samples (the model's inputs, as the user gives them) -> input batches of one captured graph.

A sample is a tuple of the captured function's positional arguments (after `self`), a dict by argument
name, or a single tensor. Only a graph whose inputs are all arguments of the function Dynamo captured
(the first graph of a forward, or of nn.Sequential's wrapper `inner(*args)`) can be reached; a graph after
a graph break takes values computed in between, so it stays float32 and its report says why."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import torch

from .capture import Plan
from .options import OptionsError
from .tensors import to_numpy

RESUME_PREFIX = "torch_dynamo_resume_in_"  # how Dynamo names the functions that continue after a graph break


def _as_arguments(sample, names: list[str], positional_only: bool, i: int) -> tuple[tuple, dict]:
    """(positional values, values by argument name) of one sample."""
    if isinstance(sample, Mapping):
        return (), dict(sample)
    if isinstance(sample, torch.Tensor):
        sample = (sample,)
    if not isinstance(sample, (tuple, list)):
        raise OptionsError(f"calib sample {i} is a {type(sample).__name__}; give a tuple of the model's inputs, "
                           "a dict by argument name or a tensor")
    if not positional_only and len(sample) > len(names):
        raise OptionsError(f"calib sample {i} has {len(sample)} inputs; the model's forward takes "
                           f"{len(names)} ({', '.join(names)})")
    return tuple(sample), dict(zip(names, sample))


def graph_batches(plan: Plan, frame_name: str, frame_args: list[str], samples: list) -> tuple[list[dict] | None, str]:
    """(one dict per sample keyed by the graph's ONNX input names, "") or (None, why the samples cannot reach
    the graph)."""
    if frame_name.startswith(RESUME_PREFIX):
        return None, ("it starts after a graph break, so its inputs are values computed in between, which the "
                      "calibration samples do not reach")
    unreached = next((name for name, a in zip(plan.names, plan.arguments) if a is None), None)
    if unreached is not None:
        return None, (f"its input {unreached!r} is not an argument of {frame_name}() but a value computed before it, "
                      "which the calibration samples do not reach")
    positional_only = any(isinstance(a, int) for a in plan.arguments)
    batches = []
    for i, sample in enumerate(samples):
        positional, by_name = _as_arguments(sample, frame_args, positional_only, i)
        feeds = {}
        for name, a in zip(plan.names, plan.arguments):
            if isinstance(a, int):
                if a >= len(positional):
                    raise OptionsError(f"calib sample {i} has {len(positional)} input(s); the model takes at least "
                                       f"{a + 1}")
                feeds[name] = to_numpy(positional[a])
            elif a in by_name:
                feeds[name] = to_numpy(by_name[a])
            else:
                raise OptionsError(f"calib sample {i} has no value for the model's input {a!r}")
        batches.append(feeds)
    return batches, ""


def check_against_call(plan: Plan, args: list, batches: list[dict]) -> None:
    """OptionsError naming the sample, the input and what differs when a sample cannot be fed where the model was
    called: another rank or dtype. (A size differing on some axis makes that axis dynamic; see name_pinned_dim.)"""
    for i, batch in enumerate(batches):
        for name, p in zip(plan.names, plan.tensor_positions):
            got, called = batch[name], args[p]
            if got.ndim != called.dim():
                raise OptionsError(f"calib sample {i}: input {name!r} is {_shape(got.shape)} ({got.ndim} dims), but the "
                                   f"model was called with {_shape(called.shape)} ({called.dim()} dims)")
            if got.dtype != np.dtype(str(called.dtype).removeprefix("torch.")):
                raise OptionsError(f"calib sample {i}: input {name!r} is {got.dtype}, but the model was called with "
                                   f"{str(called.dtype).removeprefix('torch.')}")


def name_pinned_dim(plan: Plan, args: list, batches: list[dict], message: str) -> str | None:
    """When torch.export refused an axis made dynamic for the calibration samples ("Constraints violated
    (L['tensors'][0].size()[2])"): one sentence naming the first sample whose size differs there, else None."""
    found = re.search(r"\[(\d+)\]\.size\(\)\[(\d+)\]", message)
    if found is None:
        return None
    index, axis = int(found.group(1)), int(found.group(2))
    if index >= len(plan.names):
        return None
    name, called = plan.names[index], args[plan.tensor_positions[index]]
    for i, batch in enumerate(batches):
        got = batch[name].shape
        if axis < len(got) and got[axis] != called.shape[axis]:
            return (f"calib sample {i}: input {name!r} is {_shape(got)}, but the model was called with "
                    f"{_shape(called.shape)} and takes only size {called.shape[axis]} on dim {axis}; give samples of "
                    "the sizes the model runs at")
    return None


def first_unfit_sample(model, plan: Plan, args: list, batches: list[dict]) -> str | None:
    """When quantizing failed: one sentence naming the first sample the float model cannot run (a size the model
    only takes in relation to another, such as a Flatten before a Linear), else None (the failure was not theirs)."""
    import onnxruntime as ort

    from optim.ep_plugin import cpu_session

    session = cpu_session(model.SerializeToString())
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # the failure is said once, below
    for i, batch in enumerate(batches):
        try:
            session.run(None, batch, quiet)
        except Exception as e:  # noqa: BLE001 - ONNX Runtime's error for this sample, quoted
            shapes = ", ".join(f"{name!r} {_shape(batch[name].shape)}" for name in plan.names)
            called = ", ".join(f"{_shape(args[p].shape)}" for p in plan.tensor_positions)
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return (f"calib sample {i} ({shapes}) does not run through the model, which was called with {called}: "
                    f"{message}; give samples of the sizes the model runs at")
    return None


def _shape(shape) -> str:
    return "x".join(str(int(d)) for d in shape) or "a scalar"
