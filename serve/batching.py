"""Requests as one batch: which can share a batch, concatenating their inputs along dim 0, splitting the outputs
back. Pure functions, shared by the asyncio batcher (batcher.py) and the Ray Serve deployment (ray.py).

Requests can share a batch only when every input agrees in everything but dim 0 (dtype and the other dims):
`group_key` says which; a model without a batch axis never batches (each request is its own group).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

Tensors = dict[str, np.ndarray]


def rows(inputs: Tensors) -> int:
    """The request's batch size: dim 0 of its inputs (checked equal by models.ServedModel.check_inputs); 1 for a
    request without inputs or with a 0-d one (a model without a batch axis)."""
    first = next(iter(inputs.values()), None)
    return first.shape[0] if first is not None and first.ndim else 1


def group_key(inputs: Tensors) -> tuple:
    """Equal for requests whose inputs can be concatenated along dim 0."""
    return tuple(sorted((name, a.dtype.str, a.shape[1:]) for name, a in inputs.items()))


def concatenate(requests: list[Tensors]) -> Tensors:
    """One input per name, the requests' rows in order (one request: its own arrays, no copy)."""
    if len(requests) == 1:
        return requests[0]
    return {name: np.concatenate([r[name] for r in requests]) for name in requests[0]}


def split(outputs: Tensors, sizes: list[int]) -> list[Tensors]:
    """The batch's outputs cut back into each request's rows; ValueError when an output's dim 0 is not the
    batch's size (a model whose dim 0 is symbolic but not the batch)."""
    total = sum(sizes)
    for name, array in outputs.items():
        if array.ndim == 0 or array.shape[0] != total:
            raise ValueError(f"output {name!r} has shape {list(array.shape)}, not {total} rows of the batch: "
                             "the model's dim 0 is not a batch axis")
    if len(sizes) == 1:
        return [outputs]
    bounds = np.cumsum(sizes)[:-1]
    pieces = {name: np.split(array, bounds) for name, array in outputs.items()}
    return [{name: pieces[name][i] for name in outputs} for i in range(len(sizes))]


def run_groups(run: Callable[[Tensors], Tensors], requests: list[Tensors],
               batch_axis: bool) -> list[Tensors | Exception]:
    """Each request's outputs (or the exception its group raised), running every group of requests that can be
    concatenated as one batch, in order of first appearance; without a batch axis, each request alone."""
    results: list[Tensors | Exception] = [None] * len(requests)  # type: ignore[list-item]
    groups: dict[tuple, list[int]] = {}
    for i, inputs in enumerate(requests):
        groups.setdefault(group_key(inputs) if batch_axis else (i,), []).append(i)
    for members in groups.values():
        try:
            outputs = split(run(concatenate([requests[i] for i in members])), [rows(requests[i]) for i in members])
        except Exception as e:  # noqa: BLE001 - the group's requests get the error, the others still run
            outputs = [e] * len(members)
        for i, out in zip(members, outputs):
            results[i] = out
    return results
