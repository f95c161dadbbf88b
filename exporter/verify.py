"""Checking the exported ONNX file against PyTorch: ONNX Runtime's CPU EP vs the torch module.

Every output is compared under optim.common.comparison's named tolerances, named in each report row:
"float" (FLOAT_ATOL, FLOAT_RTOL) for float32/float64, "half" for float16, "exact" for integer and bool
outputs; an element passes when |onnx - torch| <= atol + rtol * |torch|, and NaN must sit at the same
positions in both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from optim.common.comparison import DEFAULT_TOLERANCE, OutputCheck, Tolerance, compare_output
from optim.ep_plugin import cpu_session
from optim.ep_plugin.ort_errors import ort_error_message

from .errors import ExportError, VerificationError, first_line
from .examples import describe
from .stability import explain_failure, suggested_atol


def check_against_torch(output: str, got: np.ndarray, want: np.ndarray,
                        tolerance: Tolerance = DEFAULT_TOLERANCE) -> OutputCheck:
    """ONNX Runtime's result `got` for `output` against PyTorch's `want`."""
    return compare_output(output, got, want, tolerance, labels=("onnx", "torch"))


def report_row(check: str, c: OutputCheck) -> dict:
    """The report row of one output on the `check` inputs ("example", "resized"): output, check, max_abs,
    max_rel (None when no reference value exceeds atol: it would measure nothing), tolerance, atol, rtol, passed,
    problem."""
    return {"output": c.name, "check": check, "max_abs": c.max_abs, "max_rel": c.max_rel if c.rel_measured else None,
            "tolerance": c.tolerance,
            "atol": c.atol, "rtol": c.rtol, "passed": c.passed, "problem": c.problem}


def verify_onnx(path: str | Path, reference: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]],
                checks: list[tuple[str, Mapping[str, np.ndarray]]],
                progress: Callable[[str], None] | None = None, tolerance: Tolerance = DEFAULT_TOLERANCE,
                reference64: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]] | None = None) -> list[dict]:
    """Runs the ONNX file on ONNX Runtime's CPU EP for each (check name, inputs) and compares every
    output with `reference(inputs)` (the PyTorch outputs, flattened in the exporter's order) within
    `tolerance`.

    Returns the report rows when all pass; raises VerificationError with the numbers (and the
    rows) otherwise, ExportError when ONNX Runtime cannot load or run the file. On a failure,
    `reference64(inputs)` (the model in float64) says whether PyTorch's own float32 misses the
    tolerance too (stability.explain_failure). progress(str) gets a line per check.
    """
    say = progress or (lambda _line: None)
    try:
        # The graph as written: ORT's own fusions would only add rounding differences of their own.
        session = cpu_session(str(path), optimization="disable")
    except Exception as e:
        raise ExportError(f"ONNX Runtime cannot load the exported model ({ort_error_message(e)}); try another --opset") from None
    names = [o.name for o in session.get_outputs()]
    results: list[tuple[str, OutputCheck]] = []
    why = ""
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
                f"ONNX Runtime fails on the {check} inputs ({describe(feeds)}): {ort_error_message(e)}; the export "
                f"probably fixed a size that should be dynamic"
            ) from None
        if len(got) != len(want):
            raise ExportError(f"the ONNX model has {len(got)} outputs but the PyTorch model returns {len(want)} tensors")
        rows = [check_against_torch(name, g, w, tolerance) for name, g, w in zip(names, got, want)]
        results.extend((check, c) for c in rows)
        if not why and reference64 is not None and not all(c.passed for c in rows):
            say(f"checking PyTorch's float32 against float64 on the {check} inputs")
            why = explain_failure(names, got, want, lambda: reference64(feeds), tolerance)
    report = [report_row(check, c) for check, c in results]
    failed = [(check, c) for check, c in results if not c.passed]
    if failed:
        worst = max(c.max_abs for _, c in failed)
        way_out = (f"to keep the file, loosen the check (--atol {suggested_atol(worst):g}) or write it unverified "
                   f"(--no-verify)" if np.isfinite(worst) else "")
        raise VerificationError("; ".join(filter(None, [
            "verification against PyTorch failed, so no file was written: " + "; ".join(
                f"output {c.name!r} on the {check} inputs: {c.failure()}" for check, c in failed), why, way_out])),
            report=report)
    return report

