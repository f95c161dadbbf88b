"""The proof every optimize run ends with: the optimized model passes onnx.checker's full check
(which includes strict shape inference), keeps the input model's signature, and computes the
input model's outputs on ONNX Runtime's CPU EP within a named tolerance.

Both models run with ORT's graph optimizations off, so the comparison is between the two graphs,
not between ORT's own fusions of them.

Tolerances (an element passes when |optimized - input| <= atol + rtol * |input|):
  FLOAT_ATOL, FLOAT_RTOL  float32/float64. Fusions (Gelu, LayerNormalization, folded BatchNorm)
                          round differently from the ops they replace: ~1e-6 relative on the zoo
                          and MiniLM. 1e-4 is far above that and far below a wrong rewrite.
  HALF_ATOL, HALF_RTOL    float16/bfloat16, with their 11/8-bit mantissas.
Integer, bool and string outputs must be equal; NaN must stay at the same positions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx

from optim.ep_plugin import cpu_session
from optim.ep_plugin.inputs import RunInputError, load_inputs, random_inputs
from optim.ep_plugin.ort_errors import ort_error_message

from .errors import OptimizeError
from .model_io import model_source

FLOAT_ATOL = 1e-4
FLOAT_RTOL = 1e-4
HALF_ATOL = 1e-2
HALF_RTOL = 1e-2
# Random inputs give every dynamic dim each of these sizes in turn (unless --input fixes the
# shapes): above 1, so batch- and sequence-mixing bugs show; two of them, so a rewrite that bakes
# in one size fails on the other; small, so the proof stays fast.
DYNAMIC_DIMS = (3, 5)


@dataclass(frozen=True)
class Tolerance:
    atol: float = FLOAT_ATOL
    rtol: float = FLOAT_RTOL

    def limits(self, dtype: np.dtype) -> tuple[float, float] | None:
        """(atol, rtol) for a float dtype (at least the half-precision ones for 16-bit floats);
        None for types that must match exactly."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f" and dtype.name != "bfloat16":
            return None
        if dtype.itemsize <= 2:
            return max(self.atol, HALF_ATOL), max(self.rtol, HALF_RTOL)
        return self.atol, self.rtol

    def describe(self, dtype: np.dtype) -> str:
        limits = self.limits(dtype)
        return f"|diff| <= {limits[0]:g} + {limits[1]:g}*|input model|" if limits else "exact"


DEFAULT_TOLERANCE = Tolerance()


@dataclass
class OutputCheck:
    """One output of the optimized model against the input model's, on one set of inputs."""

    name: str
    max_abs: float
    max_rel: float
    tolerance: str
    passed: bool
    problem: str = ""
    inputs: int = 0  # which of the reference's input sets


@dataclass
class Reference:
    """The input model's signature and its outputs on each of the proof's input sets."""

    feeds: list[dict[str, np.ndarray]]
    outputs: list[dict[str, np.ndarray]]
    source: str  # "given" or "random (seed N)"
    signature: tuple

    def describe_inputs(self) -> str:
        return "; ".join(", ".join(f"{k}: {v.dtype} {'x'.join(map(str, v.shape)) or 'scalar'}" for k, v in feeds.items())
                         for feeds in self.feeds)


@dataclass
class Proof:
    checks: list[OutputCheck] = field(default_factory=list)
    problem: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.problem is None


def signature(model: onnx.ModelProto) -> tuple:
    """Names and full types of the graph inputs (initializers excluded) and outputs, in order."""
    initializers = {t.name for t in model.graph.initializer}
    return (tuple((v.name, v.type.SerializeToString()) for v in model.graph.input if v.name not in initializers),
            tuple((v.name, v.type.SerializeToString()) for v in model.graph.output))


def make_reference(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray] | str | None = None,
                   shapes: Mapping[str, list[int]] | None = None, seed: int = 0) -> Reference:
    """Runs the input model on the CPU EP. `inputs`: arrays by name, an .npz path, or None for
    random inputs (one set per size in DYNAMIC_DIMS when the model has dynamic dims, one set of
    `shapes` when given). Raises OptimizeError when the model or the inputs cannot be run: the
    proof needs the input model's outputs."""
    with model_source(model) as source:
        try:
            session = cpu_session(source, optimization="disable")
        except Exception as e:  # noqa: BLE001 - ORT's loading errors have no common type
            raise OptimizeError(f"ONNX Runtime's CPU EP cannot load the input model ({ort_error_message(e)}), "
                                "so no optimized model could be checked against it") from None
    try:
        if isinstance(inputs, Mapping):
            sets, origin = [{k: np.asarray(v) for k, v in inputs.items()}], "given"
        elif inputs is not None:
            sets, origin = [load_inputs(inputs, session)], "given"
        else:
            origin = f"random (seed {seed})"
            dynamic = any(not isinstance(d, int) for i in session.get_inputs() for d in i.shape)
            sizes = [DYNAMIC_DIMS[0]] if shapes or not dynamic else DYNAMIC_DIMS
            sets = [random_inputs(session, {**{i.name: [d if isinstance(d, int) else size for d in i.shape]
                                               for i in session.get_inputs()}, **dict(shapes or {})}, seed)
                    for size in sizes]
    except RunInputError as e:
        raise OptimizeError(str(e)) from None
    names = [o.name for o in session.get_outputs()]
    outputs = []
    for feeds in sets:
        try:
            outputs.append(dict(zip(names, session.run(None, feeds))))
        except Exception as e:  # noqa: BLE001
            described = ", ".join(f"{k} {'x'.join(map(str, v.shape))}" for k, v in feeds.items())
            raise OptimizeError(f"the input model fails on ONNX Runtime with {origin} inputs ({described}): "
                                f"{ort_error_message(e)}; give real inputs (--inputs) or shapes (--input NAME:DIMS)") from None
    return Reference(sets, outputs, origin, signature(model))


def prove(model: onnx.ModelProto, reference: Reference, tolerance: Tolerance = DEFAULT_TOLERANCE) -> Proof:
    """Checks `model` against the reference; Proof.problem says the first thing wrong."""
    t0 = time.perf_counter()
    proof = Proof()
    proof.problem = _structure_problem(model, reference)
    if proof.problem is None:
        proof.checks, proof.problem = _numeric_checks(model, reference, tolerance)
    proof.seconds = time.perf_counter() - t0
    return proof


def _structure_problem(model: onnx.ModelProto, reference: Reference) -> str | None:
    mine = signature(model)
    for kind, have, want in (("inputs", mine[0], reference.signature[0]), ("outputs", mine[1], reference.signature[1])):
        if have != want:
            names = [n for n, _ in have]
            wanted = [n for n, _ in want]
            detail = f"{names} instead of {wanted}" if names != wanted else "same names, different types or shapes"
            return f"the graph {kind} changed: {detail}"
    with model_source(model) as source:
        try:
            onnx.checker.check_model(source, full_check=True)
        except Exception as e:  # noqa: BLE001 - checker and inference errors differ in type
            return f"onnx.checker rejects it: {str(e).strip().splitlines()[0]}"
    return None


def _numeric_checks(model: onnx.ModelProto, reference: Reference, tolerance: Tolerance) -> tuple[list[OutputCheck], str | None]:
    checks = []
    with model_source(model) as source:
        try:
            session = cpu_session(source, optimization="disable")
            names = [o.name for o in session.get_outputs()]
            for k, (feeds, want) in enumerate(zip(reference.feeds, reference.outputs)):
                for name, value in zip(names, session.run(None, feeds)):
                    checks.append(compare_output(name, value, want[name], tolerance, inputs=k))
        except Exception as e:  # noqa: BLE001
            return checks, f"ONNX Runtime cannot run it: {ort_error_message(e)}"
    failed = [c for c in checks if not c.passed]
    if not failed:
        return checks, None
    c = failed[0]
    detail = c.problem if c.max_abs == float("inf") else (
        f"max abs error {c.max_abs:.3g}, max rel error {c.max_rel:.3g} over tolerance {c.tolerance} ({c.problem})")
    where = f" on input set {c.inputs + 1}" if len(reference.feeds) > 1 else ""
    return checks, f"output {c.name!r} differs from the input model's{where}: {detail}"


def compare_output(name: str, got: np.ndarray, want: np.ndarray, tolerance: Tolerance, inputs: int = 0) -> OutputCheck:
    """`got` (optimized) against `want` (input model). max_rel skips elements with |want| <= atol,
    where relative error measures only rounding noise around zero."""
    if not isinstance(want, np.ndarray) or not isinstance(got, np.ndarray):  # sequences, maps: exact
        same = type(got) is type(want) and repr(got) == repr(want)
        return OutputCheck(name, 0.0 if same else float("inf"), 0.0 if same else float("inf"), "exact", same,
                           "" if same else "non-tensor outputs differ", inputs)
    check = OutputCheck(name, float("inf"), float("inf"), tolerance.describe(want.dtype), False, inputs=inputs)
    if got.shape != want.shape or got.dtype != want.dtype:
        check.problem = f"{got.dtype} {list(got.shape)} instead of {want.dtype} {list(want.shape)}"
        return check
    limits = tolerance.limits(want.dtype)
    if limits is None:
        check.passed = bool(np.array_equal(got, want))
        check.max_abs = check.max_rel = 0.0 if check.passed else float("inf")
        check.problem = "" if check.passed else f"{int(np.sum(got != want))} elements differ (exact match required)"
        return check
    atol, rtol = limits
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        check.problem = f"NaN at {int(np.isnan(g).sum())} positions instead of {int(np.isnan(w).sum())}"
        return check
    same = (g == w) | np.isnan(w)  # equal infinities differ by nothing
    diff = np.where(same, 0.0, np.abs(g - w))
    scale = np.where(np.isnan(w), 0.0, np.abs(w))
    check.max_abs = float(diff.max()) if diff.size else 0.0
    significant = scale > atol
    check.max_rel = float((diff[significant] / scale[significant]).max()) if significant.any() else 0.0
    over = diff > atol + rtol * scale
    check.passed = not over.any()
    if not check.passed:
        worst = np.unravel_index(int(np.argmax(diff - rtol * scale)), diff.shape)
        check.problem = f"worst at {tuple(int(i) for i in worst)}: {g[worst]:.6g} instead of {w[worst]:.6g}"
    return check
