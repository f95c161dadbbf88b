"""Why a verification failed: the export, or PyTorch's own float32.

Some models are unstable in float32 on their inputs (random weights make large activations that cancel:
EfficientNetV2 and Inception-v3 untrained): two correct float32 runtimes that sum in different orders then
differ by more than any sane tolerance, and so does PyTorch against itself in float64. Running the same
module in float64 tells the two cases apart: PyTorch's float32 far from float64 means the model, not the
export; PyTorch's float32 close to float64 while ONNX Runtime is not means the export (or ONNX Runtime).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from optim.common.comparison import Tolerance, compare_output

from .errors import first_line

# ONNX Runtime at most this many times further from float64 than PyTorch's float32 still counts as
# "as close as PyTorch": two float32 GEMMs that block K differently land on either side of the exact sum.
AS_CLOSE_FACTOR = 4.0


def float64_twin(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of `module` (the original keeps its float32 weights)."""
    return copy.deepcopy(module).to(torch.float64)


def as_float64(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs with float arrays widened to float64 (integer and bool inputs as they are)."""
    return {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in feeds.items()}


def explain_failure(names: Sequence[str], got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                    run_float64: Callable[[], list[np.ndarray]], tolerance: Tolerance) -> str:
    """One sentence on each failing float output: PyTorch's float32 (`want`) and ONNX Runtime's (`got`)
    against `run_float64()` (the same module and inputs in float64), and which of the two is at fault.
    '' when there is no float output to judge; a sentence saying so when the float64 run fails."""
    failing = [i for i, (g, w) in enumerate(zip(got, want))
               if isinstance(w, np.ndarray) and w.dtype.kind == "f" and not compare_output(names[i], g, w, tolerance).passed]
    if not failing:
        return ""
    try:
        wide = run_float64()
    except Exception as e:  # noqa: BLE001 - a model with float32 fixed in its code cannot run in float64
        return f"PyTorch cannot run this model in float64 to tell ({type(e).__name__}: {first_line(e)})"
    return "; ".join(_judge(names[i], got[i], want[i], wide[i], tolerance) for i in failing)


def _judge(name: str, got: np.ndarray, want: np.ndarray, wide: np.ndarray, tolerance: Tolerance) -> str:
    exact = np.asarray(wide).astype(want.dtype)  # float64 rounded once: far below any tolerance
    torch32 = compare_output(name, want, exact, tolerance)
    onnx = compare_output(name, got, exact, tolerance)
    figures = f"PyTorch's float32 is off float64 by max abs {torch32.max_abs:.3g}, ONNX Runtime's by {onnx.max_abs:.3g}"
    if torch32.passed:
        return (f"output {name!r}: {figures}: PyTorch's float32 is within the tolerance of float64 and ONNX Runtime "
                f"is not, so the exported graph differs from the model")
    if onnx.max_abs <= AS_CLOSE_FACTOR * torch32.max_abs:
        return (f"output {name!r}: {figures}: the model itself is unstable in float32 on these inputs (PyTorch "
                f"misses the tolerance against its own float64), and the export is as close to float64 as PyTorch")
    return (f"output {name!r}: {figures}: the model is unstable in float32, and ONNX Runtime is further off "
            f"than PyTorch")


def suggested_atol(max_abs: float) -> float:
    """A round tolerance above `max_abs`: 1, 2 or 5 times a power of ten."""
    if not np.isfinite(max_abs) or max_abs <= 0:
        return max_abs
    power = 10.0 ** np.floor(np.log10(max_abs))
    return float(next(step * power for step in (1, 2, 5, 10) if step * power > max_abs))
