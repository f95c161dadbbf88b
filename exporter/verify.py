"""Checking the exported ONNX file against PyTorch: ONNX Runtime's CPU EP vs the torch module.

Tolerances, named in every report row (an element passes when |onnx - torch| <= ATOL + RTOL * |torch|):
  FLOAT_ATOL, FLOAT_RTOL  "float": float32/float64. ONNX Runtime and PyTorch sum in different orders
                          and fuse differently, so results differ in the last bits; 1e-4 is far
                          above that for the zoo's magnitudes and far below any real export bug.
  HALF_ATOL, HALF_RTOL    "half": float16, with its 11-bit mantissa.
"exact": integer and bool outputs must be equal. NaN must sit at the same positions in both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .errors import ExportError, VerificationError, first_line
from .examples import describe

FLOAT_ATOL = 1e-4
FLOAT_RTOL = 1e-4
HALF_ATOL = 1e-2
HALF_RTOL = 1e-2


def tolerance(dtype: np.dtype) -> tuple[str, float, float]:
    """(name, atol, rtol) for outputs of `dtype`: "half", "float", or "exact" (0, 0) for integer and bool."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return "half", HALF_ATOL, HALF_RTOL
    if dtype.kind in "fc":
        return "float", FLOAT_ATOL, FLOAT_RTOL
    return "exact", 0.0, 0.0


def compare(output: str, check: str, got: np.ndarray, want: np.ndarray) -> dict:
    """One report row: ONNX result `got` against the PyTorch result `want`.

    passed applies the combined tolerance per element. max_abs and max_rel are the largest
    elementwise |diff| and |diff|/|want|; max_rel skips elements with |want| <= atol, where it
    would only measure rounding noise around zero. Near-zero elements can still show a max_rel
    above rtol and pass, because atol covers them.
    """
    name, atol, rtol = tolerance(want.dtype)
    row = {"output": output, "check": check, "max_abs": float("inf"), "max_rel": float("inf"),
           "tolerance": f"{name} (|diff| <= {atol:g} + {rtol:g}*|torch|)" if name != "exact" else "exact",
           "atol": atol, "rtol": rtol, "passed": False, "problem": ""}
    if got.shape != want.shape:
        row["problem"] = f"shape {_dims(got.shape)} instead of {_dims(want.shape)}"
        return row
    if got.dtype != want.dtype:
        row["problem"] = f"dtype {got.dtype} instead of {want.dtype}"
        return row
    if got.size == 0:
        row.update(max_abs=0.0, max_rel=0.0, passed=True)
        return row
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if not np.array_equal(nan_g, nan_w):
        row["problem"] = f"NaN in {int(nan_g.sum())} elements instead of {int(nan_w.sum())}"
        return row
    # Equal values (infinities included) differ by 0; NaN positions were checked above.
    diff = np.where((g == w) | nan_g, 0.0, np.abs(g - w))
    scale = np.abs(np.where(nan_w, 0.0, w))
    meaningful = scale > atol
    row["max_abs"] = float(diff.max())
    row["max_rel"] = float((diff[meaningful] / scale[meaningful]).max()) if meaningful.any() else 0.0
    row["passed"] = bool(np.all(diff <= atol + rtol * scale))
    if not row["passed"]:
        index = np.unravel_index(int(np.argmax(diff - rtol * scale)), diff.shape)
        row["problem"] = f"worst element {tuple(int(i) for i in index)}: onnx {g[index]:.6g}, torch {w[index]:.6g}"
    return row


def verify_onnx(path: str | Path, reference: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]],
                checks: list[tuple[str, Mapping[str, np.ndarray]]],
                progress: Callable[[str], None] | None = None) -> list[dict]:
    """Runs the ONNX file on ONNX Runtime's CPU EP for each (check name, inputs) and compares every
    output with `reference(inputs)` (the PyTorch outputs, flattened in the exporter's order).

    Returns the report rows when all pass; raises VerificationError with the numbers (and the
    rows) otherwise, ExportError when ONNX Runtime cannot load or run the file. progress(str)
    gets a line per check.
    """
    say = progress or (lambda _line: None)
    options = ort.SessionOptions()
    # Check the graph as written: ORT's own fusions would only add rounding differences of their own.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ExportError(f"ONNX Runtime cannot load the exported model ({_ort_message(e)}); try another --opset") from None
    names = [o.name for o in session.get_outputs()]
    report = []
    for check, feeds in checks:
        say(f"verifying against PyTorch on ONNX Runtime's CPU EP: {check} inputs ({describe(feeds)})")
        try:
            want = reference(feeds)
        except Exception as e:
            raise ExportError(
                f"the PyTorch model fails on the {check} inputs ({describe(feeds)}): {type(e).__name__}: "
                f"{first_line(e)}; if an axis is not really dynamic, do not mark it so"
            ) from None
        used = {i.name: feeds[i.name] for i in session.get_inputs()}
        try:
            got = session.run(None, used)
        except Exception as e:
            raise ExportError(
                f"ONNX Runtime fails on the {check} inputs ({describe(feeds)}): {_ort_message(e)}; the export "
                f"probably fixed a size that should be dynamic"
            ) from None
        if len(got) != len(want):
            raise ExportError(f"the ONNX model has {len(got)} outputs but the PyTorch model returns {len(want)} tensors")
        report.extend(compare(name, check, g, w) for name, g, w in zip(names, got, want))
    failed = [r for r in report if not r["passed"]]
    if failed:
        raise VerificationError("verification against PyTorch failed, so no file was written: " + "; ".join(
            f"output {r['output']!r} on the {r['check']} inputs: "
            + (r["problem"] if r["max_abs"] == float("inf") else
               f"max abs error {r['max_abs']:.3g}, max rel error {r['max_rel']:.3g} over tolerance {r['tolerance']} "
               f"({r['problem']})")
            for r in failed), report=report)
    return report


def _dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _ort_message(e: BaseException) -> str:
    # ORT prefixes "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : "; the rest is the message.
    text = first_line(e)
    return text.split(" : ", 3)[-1] if text.startswith("[ONNXRuntimeError]") else text
