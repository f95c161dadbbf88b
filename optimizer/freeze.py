"""Fixing a model input to one value (`optim optimize --freeze sr=16000`): the input becomes a constant, so the
folding and the passes can decide what depends on it (the If nodes a voice-activity model switches on its sample
rate, the shape arithmetic of a fixed size). The optimized model no longer has the input."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .errors import OptimizeError


def parse_freeze(text: str) -> tuple[str, str]:
    """'NAME=VALUE' -> (name, value text)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise OptimizeError(f"--freeze {text!r} is not NAME=VALUE (e.g. sr=16000)")
    return name.strip(), value.strip()


def _number(text: str, dtype: np.dtype, name: str):
    lowered = text.lower()
    if dtype == np.bool_:
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise OptimizeError(f"--freeze {name}={text}: input {name!r} is bool; give true or false")
    try:
        value = float(text)
    except ValueError:
        raise OptimizeError(f"--freeze {name}={text}: {text!r} is not a number") from None
    if dtype.kind in "iu":
        if not value.is_integer():
            raise OptimizeError(f"--freeze {name}={text}: input {name!r} is {dtype.name}; give a whole number")
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OptimizeError(f"--freeze {name}={text}: out of {dtype.name}'s range")
        return int(value)
    return value


def _declared(value_info: onnx.ValueInfoProto) -> tuple[np.dtype, list[int | str]]:
    tensor = value_info.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
    return np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)), dims


def _value(name: str, given, dtype: np.dtype, dims: list[int | str]) -> np.ndarray:
    if isinstance(given, np.ndarray):
        array = given.astype(dtype)
        if array.ndim != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, array.shape)):
            raise OptimizeError(f"--freeze {name}: shape {list(array.shape)} does not fit the input's {dims}")
        return array
    number = _number(str(given), dtype, name) if not isinstance(given, (bool, int, float)) else given
    if any(not isinstance(d, int) for d in dims):
        raise OptimizeError(f"--freeze {name}={given}: input {name!r} has dynamic dims {dims}; a single value freezes "
                            "an input of a fixed shape (a 0-d sample rate, a [1] flag)")
    return np.full(dims, number, dtype=dtype)


def freeze_inputs(model: onnx.ModelProto, values: Mapping[str, object]) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of `model` with each input in `values` (a number or its text, or an array) made an initializer of its
    declared dtype and shape; returns it and {name: the value as shown in reports}. OptimizeError names an unknown
    input or a value that does not fit."""
    if not values:
        return model, {}
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    graph = frozen.graph
    initializers = {t.name for t in graph.initializer}
    inputs = {v.name: v for v in graph.input if v.name not in initializers}
    shown = {}
    for name, given in values.items():
        if name not in inputs:
            raise OptimizeError(f"--freeze {name}: the model has no input {name!r}; inputs are "
                                f"{', '.join(inputs) or 'none'}")
        dtype, dims = _declared(inputs[name])
        array = _value(name, given, dtype, dims)
        graph.initializer.append(numpy_helper.from_array(array, name))
        shown[name] = str(array.tolist())
    keep = [v for v in graph.input if v.name not in values]
    del graph.input[:]
    graph.input.extend(keep)
    return frozen, shown
