"""Outputs against a reference's: the named tolerances and the one definition of the error figures that
every step of the verification chain uses (export vs PyTorch, optimize's proof, `optim run --compare`,
the EP's differential tests).

An element of a float output passes when |got - want| <= atol + rtol * |want|. Integer, bool and
string outputs must be equal. NaN must sit at the same positions, and infinities must be the same
infinities at the same positions.

Named tolerances:
  FLOAT_ATOL, FLOAT_RTOL  float32/float64 (and complex). Two runtimes, or two graphs of one computation,
                          sum in different orders and fuse differently (blocked GEMMs, FMA, Gelu and
                          LayerNormalization fusions, folded BatchNorm), so results differ in the last
                          bits: ~1e-6 relative on the zoo and MiniLM. 1e-4 is far above that and far
                          below a wrong export, rewrite or kernel.
  HALF_ATOL, HALF_RTOL    float16/bfloat16, with their 11/8-bit mantissas: 16-bit floats get at least
                          these, whatever tolerance is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT_ATOL = 1e-4
FLOAT_RTOL = 1e-4
HALF_ATOL = 1e-2
HALF_RTOL = 1e-2
_INF = float("inf")


@dataclass(frozen=True)
class Tolerance:
    """atol and rtol for float outputs (at least HALF_ATOL / HALF_RTOL for 16-bit floats)."""

    atol: float = FLOAT_ATOL
    rtol: float = FLOAT_RTOL

    def limits(self, dtype) -> tuple[str, float, float]:
        """(name, atol, rtol) for outputs of `dtype`: "half" for 16-bit floats, "float" for the other
        floats, "exact" (0, 0) for integer, bool and string outputs."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "fc" and dtype.name != "bfloat16":
            return "exact", 0.0, 0.0
        if dtype.itemsize <= 2:
            return "half", max(self.atol, HALF_ATOL), max(self.rtol, HALF_RTOL)
        return "float", self.atol, self.rtol

    def describe(self, dtype, reference: str) -> str:
        """How outputs of `dtype` are judged against `reference`, e.g. "float (|diff| <= 0.0001 + 0.0001*|torch|)"."""
        name, atol, rtol = self.limits(dtype)
        return "exact" if name == "exact" else f"{name} (|diff| <= {atol:g} + {rtol:g}*|{reference}|)"


DEFAULT_TOLERANCE = Tolerance()  # FLOAT_ATOL / FLOAT_RTOL, HALF_* for 16-bit floats


@dataclass
class OutputCheck:
    """One output against the reference's, on one set of inputs."""

    name: str
    max_abs: float  # largest |got - want|; inf where they cannot be compared (shape, dtype, NaN or inf positions)
    max_rel: float  # largest |got - want| / |want| where |want| > atol: nearer zero it measures only rounding noise
    tolerance: str  # how it was judged: "float (|diff| <= 0.0001 + 0.0001*|torch|)", "exact", ...
    passed: bool
    problem: str = ""  # why it failed: what differs, or the worst element
    inputs: int = 0  # which of the caller's input sets (0 where there is one)
    atol: float = 0.0
    rtol: float = 0.0
    rel_measured: bool = True  # False when no reference value exceeds atol: max_rel then measures nothing

    def failure(self) -> str:
        """What a failed check's message says: the problem, after the error figures where they were measured."""
        if self.max_abs == _INF:
            return self.problem
        return (f"max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g} over tolerance {self.tolerance} "
                f"({self.problem})")


def compare_output(name: str, got, want, tolerance: Tolerance = DEFAULT_TOLERANCE, *,
                   labels: tuple[str, str] = ("got", "want"), inputs: int = 0) -> OutputCheck:
    """`got` against the reference `want`, within `tolerance` (see the module doc).

    labels name the two sides where a check explains itself: ("onnx", "torch") gives
    "worst element (0, 3): onnx 1.5, torch 0.5" and a tolerance "... *|torch|". Outputs that are not
    arrays (sequences, maps) must be equal.
    """
    got_label, want_label = labels
    got, want = (np.asarray(v) if isinstance(v, np.generic) else v for v in (got, want))  # numpy scalars are 0-d arrays
    if not isinstance(want, np.ndarray) or not isinstance(got, np.ndarray):
        same = type(got) is type(want) and repr(got) == repr(want)
        return OutputCheck(name, 0.0 if same else _INF, 0.0 if same else _INF, "exact", same,
                           "" if same else "non-tensor outputs differ", inputs)
    kind, atol, rtol = tolerance.limits(want.dtype)
    check = OutputCheck(name, _INF, _INF, tolerance.describe(want.dtype, want_label), False, inputs=inputs,
                        atol=atol, rtol=rtol)
    if got.shape != want.shape:
        check.problem = f"shape {_dims(got.shape)} instead of {_dims(want.shape)}"
    elif got.dtype != want.dtype:
        check.problem = f"dtype {got.dtype} instead of {want.dtype}"
    elif got.size == 0:
        check.max_abs = check.max_rel = 0.0
        check.passed = True
    elif want.dtype.kind in "fciub" or kind != "exact":
        _numbers(check, got, want, kind, got_label, want_label)
    else:  # strings and objects: equal or not, no figures
        differ = int(np.sum(got != want))
        check.passed = differ == 0
        check.max_abs = check.max_rel = 0.0 if check.passed else _INF
        check.problem = "" if check.passed else f"{differ} elements differ (exact match required)"
    return check


def _numbers(check: OutputCheck, got: np.ndarray, want: np.ndarray, kind: str, got_label: str, want_label: str) -> None:
    """The figures and the verdict for numeric outputs of equal shape and dtype (fills `check`)."""
    wide = np.complex128 if want.dtype.kind == "c" else np.float64
    g, w = got.astype(wide), want.astype(wide)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if not np.array_equal(nan_g, nan_w):
        check.problem = f"NaN in {int(nan_g.sum())} elements instead of {int(nan_w.sum())}"
        return
    inf_g, inf_w = np.isinf(g), np.isinf(w)
    if not (np.array_equal(inf_g, inf_w) and np.array_equal(g[inf_g], w[inf_w])):
        check.problem = (f"infinite in {int(inf_g.sum())} elements instead of {int(inf_w.sum())}"
                         if inf_g.sum() != inf_w.sum() else "infinities at other positions or of another sign")
        return
    finite = ~(nan_w | inf_w)  # NaN and infinities are where (and what) they should be: they differ by nothing
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(g - w), 0.0)
    scale = np.where(finite, np.abs(w), 0.0)
    meaningful = scale > check.atol
    check.max_abs = float(diff.max())
    check.max_rel = float((diff[meaningful] / scale[meaningful]).max()) if meaningful.any() else 0.0
    check.rel_measured = bool(meaningful.any())
    # Integers are compared as they are: float64 cannot tell large int64 values one apart.
    over = (got != want) if kind == "exact" else diff > check.atol + check.rtol * scale
    check.passed = not over.any()
    if not check.passed:
        worst = np.unravel_index(int(np.argmax(np.where(over, diff - check.rtol * scale, -_INF))), diff.shape)
        check.problem = (f"worst element {tuple(int(i) for i in worst)}: {got_label} {g[worst]:.6g}, "
                         f"{want_label} {w[worst]:.6g}")


def relative_l2(got: np.ndarray, ref: np.ndarray) -> float:
    """||got - ref|| / ||ref|| in float64: how far a whole output is from its reference, in one number."""
    ref64 = ref.astype(np.float64)
    return float(np.linalg.norm(got.astype(np.float64) - ref64) / max(np.linalg.norm(ref64), 1e-30))


def _dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"
