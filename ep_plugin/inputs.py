"""Inputs for a session: shapes from the command line, random arrays of the right dtypes, .npz files checked
against the model's inputs, a batch size applied to every input. Errors are RunInputError, one sentence
with the fix."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort

from optim.common.errors import UserError

_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


class RunInputError(UserError):
    """The inputs given do not fit the model (names, dtypes, shapes)."""


def parse_shape(text: str) -> tuple[str, list[int]]:
    """'NAME:1x3x224x224' -> ('NAME', [1, 3, 224, 224]); raises RunInputError with the fix on bad text."""
    name, sep, dims = text.rpartition(":")
    if not sep or not name or not dims:
        raise RunInputError(f"bad --input {text!r}: expected NAME:DIMS such as x:1x3x224x224")
    try:
        shape = [int(d) for d in dims.lower().split("x")]
    except ValueError:
        raise RunInputError(f"bad --input {text!r}: dimensions must be integers separated by 'x', e.g. 1x3x224x224") from None
    if any(d < 0 for d in shape):
        raise RunInputError(f"bad --input {text!r}: dimensions must be >= 0")
    return name, shape


def random_inputs(sess: ort.InferenceSession, shapes: dict[str, list[int]] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the right dtypes and shapes; dynamic dims must be given in `shapes`."""
    shapes = dict(shapes or {})
    names = {i.name for i in sess.get_inputs()}
    unknown = sorted(set(shapes) - names)
    if unknown:
        raise RunInputError(f"no model input named {', '.join(map(repr, unknown))}; inputs are {', '.join(sorted(names))}")
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        if i.type not in _DTYPES:
            raise RunInputError(f"input {i.name!r} has type {i.type}, which random inputs cannot make; pass --inputs")
        if i.name in shapes:
            shape = shapes[i.name]
            if len(shape) != len(i.shape):
                raise RunInputError(f"input {i.name!r} has rank {len(i.shape)} ({i.shape}), --input gave {shape}")
            for d, (given, declared) in enumerate(zip(shape, i.shape)):
                if isinstance(declared, int) and declared != given:
                    raise RunInputError(f"input {i.name!r} dim {d} is fixed at {declared}, --input gave {given}")
        else:
            dynamic = [d for d in i.shape if not isinstance(d, int)]
            if dynamic:
                raise RunInputError(f"input {i.name!r} has dynamic dims {i.shape}; give its shape with --input {i.name}:DIMS")
            shape = list(i.shape)
        dtype = _DTYPES[i.type]
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype is np.bool_:
            feeds[i.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:  # ids/indices: small non-negative values are valid for embeddings and gathers
            feeds[i.name] = rng.integers(0, 10, shape).astype(dtype)
    return feeds


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of an .npz by name (no pickles); RunInputError when it cannot be read."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise RunInputError(f"cannot read inputs from {path}: {e}") from None


def load_inputs(path: str | os.PathLike, sess: ort.InferenceSession) -> dict[str, np.ndarray]:
    """Inputs from an .npz whose keys are the model's input names; checks names and dtypes."""
    feeds = read_npz(path)
    expected = {i.name: i for i in sess.get_inputs()}
    missing = sorted(set(expected) - set(feeds))
    extra = sorted(set(feeds) - set(expected))
    if missing or extra:
        raise RunInputError(
            f"{path} has arrays {sorted(feeds)}, the model expects {sorted(expected)}"
            + (f" (missing {missing})" if missing else "") + (f" (unknown {extra})" if extra else "")
        )
    for name, info in expected.items():
        want = _DTYPES.get(info.type)
        if want is not None and feeds[name].dtype != want:
            raise RunInputError(f"input {name!r} is {feeds[name].dtype} in {path}, the model expects {np.dtype(want)}")
    return feeds


def shapes_with_batch(shapes: dict[str, list[int]], sess: ort.InferenceSession, batch: int) -> dict[str, list[int]]:
    """Every input's first dimension set to `batch`; refuses inputs whose first dim is fixed otherwise."""
    out = {}
    for i in sess.get_inputs():
        shape = list(shapes.get(i.name, i.shape))
        if not shape:
            raise RunInputError(f"input {i.name!r} is a scalar: --batch needs a first dimension")
        declared = i.shape[0] if i.shape else None
        if isinstance(declared, int) and declared != batch:
            raise RunInputError(f"input {i.name!r} has a fixed batch dimension {declared}; --batch {batch} cannot change it")
        shape[0] = batch
        if any(not isinstance(d, int) for d in shape):
            raise RunInputError(f"input {i.name!r} has dynamic dims {i.shape}; give the others with --input {i.name}:DIMS")
        out[i.name] = shape
    return out

