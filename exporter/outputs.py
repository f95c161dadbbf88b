"""The model's outputs as a flat list of tensors, and the names they get in the ONNX file."""

from __future__ import annotations

from typing import Any

import torch


def flatten_outputs(result: Any, path: tuple = ()) -> list[tuple[tuple, torch.Tensor]]:
    """(path, tensor) for every tensor in a nested tuple/list/dict/namedtuple, in the order the
    exporters flatten outputs (sequence order, dict insertion order). Non-tensors are skipped:
    they do not become ONNX outputs."""
    if isinstance(result, torch.Tensor):
        return [(path, result)]
    if isinstance(result, dict):
        items = list(result.items())
    elif isinstance(result, tuple) and hasattr(result, "_fields"):  # namedtuple: its field names
        items = list(zip(result._fields, result))
    elif isinstance(result, (tuple, list)):
        items = list(enumerate(result))
    else:
        return []
    flat = []
    for key, value in items:
        flat.extend(flatten_outputs(value, path + (key,)))
    return flat


def output_names(paths: list[tuple]) -> list[str]:
    """Names from output paths: dict keys and namedtuple fields where the model has them,
    'output' for a lone tensor, 'output_<i>' for positions; nested parts joined by '_'."""
    if paths == [()]:
        return ["output"]
    names = []
    for path in paths:
        parts = [str(p) for p in path]
        if isinstance(path[0], int):
            parts[0] = f"output_{path[0]}"
        name = "_".join(parts)
        # Keys like 1 and "1" or a/b vs a_b could collide; keep names unique.
        candidate, n = name, 1
        while candidate in names:
            candidate, n = f"{name}_{n}", n + 1
        names.append(candidate)
    return names
