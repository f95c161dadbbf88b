"""Running a model on OptimEP: inputs (given or random), outputs, placement, timing, and the check
against ONNX Runtime's CPU EP."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .placement import Placement, placement
from .sessions import cpu_session, session

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


class RunInputError(ValueError):
    """The inputs given do not fit the model (names, dtypes, shapes)."""


@dataclass
class OutputCheck:
    name: str
    max_abs: float
    max_rel: float


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    placement: Placement
    seconds: float  # wall time of one run (after a warm-up run)
    checks: list[OutputCheck] = field(default_factory=list)  # vs the CPU EP, when compared

    @property
    def max_abs_error(self) -> float | None:
        return max((c.max_abs for c in self.checks), default=None) if self.checks else None

    @property
    def max_rel_error(self) -> float | None:
        return max((c.max_rel for c in self.checks), default=None) if self.checks else None


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


def load_inputs(path: str | os.PathLike, sess: ort.InferenceSession) -> dict[str, np.ndarray]:
    """Inputs from an .npz whose keys are the model's input names; checks names and dtypes."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            feeds = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise RunInputError(f"cannot read inputs from {path}: {e}") from None
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


def compare(ours: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> list[OutputCheck]:
    checks = []
    for name, r in ref.items():
        o = ours[name]
        if o.shape != r.shape:
            raise AssertionError(f"output {name!r}: OptimEP shape {o.shape}, CPU EP shape {r.shape}")
        if o.size == 0:
            checks.append(OutputCheck(name, 0.0, 0.0))
            continue
        diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
        rel = diff / np.maximum(np.abs(r.astype(np.float64)), 1e-6)
        checks.append(OutputCheck(name, float(np.nanmax(diff)), float(np.nanmax(rel))))
    return checks


def ort_error_message(e: Exception) -> str:
    """The useful sentence of an ONNX Runtime error: without the "[ONNXRuntimeError] : 2 : CODE :"
    prefix and, for a failing node, without ORT's "Non-zero status code ... Status Message:" wrapper
    (OptimEP's own message already names the node, op, dtypes and shapes)."""
    text = str(e).strip()
    if text.startswith("[ONNXRuntimeError]"):
        text = text.split(" : ", 3)[-1]
    text = text.split("Status Message: ", 1)[-1]
    if text.startswith("OptimEP: fused node"):  # the fused node's generated name tells a user nothing
        text = "OptimEP: " + text.split("': ", 1)[-1]
    return text.splitlines()[0] if text else type(e).__name__


def run_model(
    model: str | os.PathLike | bytes,
    *,
    inputs: dict[str, np.ndarray] | str | os.PathLike | None = None,
    shapes: dict[str, list[int]] | None = None,
    compare_cpu: bool = False,
    threads: int | None = None,
    seed: int = 0,
    **ep_options: str,
) -> RunResult:
    """Runs `model` once on OptimEP (after a warm-up run) and, with compare_cpu, on the CPU EP too."""
    sess = session(model, threads=threads, **ep_options)
    if inputs is None:
        feeds = random_inputs(sess, shapes, seed)
    elif isinstance(inputs, dict):
        feeds = inputs
    else:
        feeds = load_inputs(inputs, sess)
    names = [o.name for o in sess.get_outputs()]
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # a failing run raises with the message; ORT's log line would repeat it
    try:
        sess.run(None, feeds, quiet)  # warm-up: plans and buffers are made on the first run
        t0 = time.perf_counter()
        values = sess.run(None, feeds, quiet)
        seconds = time.perf_counter() - t0
    except Exception as e:
        text = str(e)
        if "INVALID_ARGUMENT" in text or "Invalid" in text:
            raise RunInputError(ort_error_message(e)) from None
        raise
    result = RunResult(dict(zip(names, values)), placement(sess), seconds)
    if compare_cpu:
        ref = cpu_session(model, threads=threads).run(None, feeds)
        result.checks = compare(result.outputs, dict(zip(names, ref)))
    return result
