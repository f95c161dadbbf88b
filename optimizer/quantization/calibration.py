"""Calibration inputs: from .npz files (one file, or a folder of them), from a Python
`module:function` returning or yielding input dicts, or random (which makes the accuracy figures
mean little). Every batch is checked against the model's inputs: names, dtypes, ranks, fixed sizes,
and finite values."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

import numpy as np
import onnx

from ..errors import OptimizeError

_FUNCTION_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
MAX_BATCHES = 10_000


class CalibrationError(OptimizeError):
    """Calibration data that does not fit the model (one sentence naming the problem)."""


def model_inputs(model: onnx.ModelProto) -> dict[str, tuple[np.dtype, list]]:
    """Graph inputs that are not initializers: name -> (numpy dtype, dims with str for dynamic)."""
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim]
        out[i.name] = (onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), dims)
    return out


def check_batch(batch: dict, inputs: dict, where: str) -> dict[str, np.ndarray]:
    """The batch as arrays, or CalibrationError naming the first mismatch."""
    if not isinstance(batch, dict):
        raise CalibrationError(f"{where} is a {type(batch).__name__}, not a dict of input name -> array")
    missing, unknown = sorted(set(inputs) - set(batch)), sorted(set(batch) - set(inputs))
    if missing or unknown:
        raise CalibrationError(f"{where} has inputs {sorted(batch)}, the model takes {sorted(inputs)}"
                               + (f" (missing {missing})" if missing else "") + (f" (unknown {unknown})" if unknown else ""))
    out = {}
    for name, (dtype, dims) in inputs.items():
        a = np.asarray(batch[name])
        if a.dtype != dtype:
            raise CalibrationError(f"{where}: input {name!r} is {a.dtype}, the model expects {dtype}")
        if a.ndim != len(dims):
            raise CalibrationError(f"{where}: input {name!r} has shape {list(a.shape)}, the model expects rank {len(dims)} ({dims})")
        for axis, (got, want) in enumerate(zip(a.shape, dims)):
            if isinstance(want, int) and want > 0 and got != want:
                raise CalibrationError(f"{where}: input {name!r} dim {axis} is {got}, the model fixes it at {want}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise CalibrationError(f"{where}: input {name!r} contains NaN or infinity; calibration needs finite values")
        out[name] = a
    return out


def _npz_batches(path: Path) -> list[dict]:
    files = sorted(path.glob("*.npz")) if path.is_dir() else [path]
    if path.is_dir() and not files:
        raise CalibrationError(f"calibration folder {path} holds no .npz files")
    batches = []
    for f in files:
        try:
            with np.load(f, allow_pickle=False) as data:
                batches.append((f.name, {k: data[k] for k in data.files}))
        except (OSError, ValueError) as e:
            raise CalibrationError(f"cannot read calibration file {f}: {e}") from None
    return batches


def _function_batches(spec: str) -> list[tuple[str, dict]]:
    module_name, attr = spec.split(":")
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise CalibrationError(f"cannot load calibration function {spec}: {e}") from None
    finally:
        sys.path.pop(0)
    try:
        produced = fn()
        batches = []
        for i, b in enumerate(produced):
            if i >= MAX_BATCHES:
                raise CalibrationError(f"calibration function {spec} yielded more than {MAX_BATCHES} batches")
            batches.append((f"batch {i} from {spec}", b))
    except CalibrationError:
        raise
    except Exception as e:
        raise CalibrationError(f"calibration function {spec} raised {type(e).__name__}: {e}") from None
    return batches


def load_calibration(source: str | os.PathLike | list[dict], model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """Checked calibration batches from an .npz file, a folder of .npz files, `module:function`, or a list of
    batches already in memory (dicts of input name -> array, e.g. from optim.torch)."""
    inputs = model_inputs(model)
    if isinstance(source, (list, tuple)):
        if not source:
            raise CalibrationError("the calibration data holds no batches")
        return [check_batch(b, inputs, f"calibration batch {i}") for i, b in enumerate(source)]
    text = os.fspath(source)
    if Path(text).exists():
        named = _npz_batches(Path(text))
    elif _FUNCTION_SPEC.match(text):
        named = _function_batches(text)
    else:
        raise CalibrationError(f"calibration source {text} does not exist and is not a module:function spec")
    if not named:
        raise CalibrationError(f"calibration source {text} gave no batches")
    return [check_batch(b, inputs, f"calibration {where}") for where, b in named]


def random_calibration(model: onnx.ModelProto, count: int, shapes: dict[str, list[int]] | None = None,
                       seed: int = 0) -> list[dict[str, np.ndarray]]:
    """`count` random batches (standard normal floats, small non-negative integers); dynamic dims
    take `shapes` or 1."""
    if count < 1:
        raise CalibrationError("--calib-random needs at least 1 batch")
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        batch = {}
        for name, (dtype, dims) in model_inputs(model).items():
            shape = (shapes or {}).get(name) or [d if isinstance(d, int) and d > 0 else 1 for d in dims]
            batch[name] = (rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(0, 10, shape)).astype(dtype)
        batches.append(batch)
    return batches
