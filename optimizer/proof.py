"""The proof every optimize run ends with: the optimized model passes onnx.checker's full check
(which includes strict shape inference), keeps the input model's signature, and computes the
input model's outputs on ONNX Runtime's CPU EP within a named tolerance.

Both models run with ORT's graph optimizations off, so the comparison is between the two graphs,
not between ORT's own fusions of them.

Outputs are compared under optim.common.comparison's named tolerances (an element passes when
|optimized - input| <= atol + rtol * |input|; --atol/--rtol replace FLOAT_ATOL/FLOAT_RTOL, 16-bit floats
get at least HALF_ATOL/HALF_RTOL); integer, bool and string outputs must be equal, NaN must stay at the
same positions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort

from optim.common.comparison import DEFAULT_TOLERANCE, OutputCheck, Tolerance, compare_output
from optim.ep_plugin import cpu_session
from optim.ep_plugin.inputs import RunInputError, load_inputs, random_inputs
from optim.ep_plugin.ort_errors import ort_error_message

from .errors import OptimizeError
from .model_io import model_source

# Random inputs give every dynamic dim each of these sizes in turn (unless --input fixes the
# shapes): above 1, so batch- and sequence-mixing bugs show; two of them, so a rewrite that bakes
# in one size fails on the other; small, so the proof stays fast.
DYNAMIC_DIMS = (3, 5)
# When the model cannot take those (a detector's strided backbone needs images of a multiple of 32), the dynamic
# dims past the first axis of float inputs of rank 3 or more (image sides, audio frames) get these, in turn, and the
# others (batch) BATCH_RETRY_DIMS; the first pair the input model runs on is used.
SPATIAL_RETRY_DIMS = ((224, 320), (320, 640))
BATCH_RETRY_DIMS = (2, 3)
LABELS = ("optimized", "input model")  # how a check names the two sides


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
    random inputs (one set per size in DYNAMIC_DIMS when the model has dynamic dims, or image-like
    sizes when it cannot take those (_random_sets); one set of `shapes` when given). Raises
    OptimizeError when the model or the inputs cannot be run: the proof needs the input model's outputs."""
    with model_source(model) as source:
        try:
            session = cpu_session(source, optimization="disable")
        except Exception as e:  # noqa: BLE001 - ORT's loading errors have no common type
            raise OptimizeError(f"ONNX Runtime's CPU EP cannot load the input model ({ort_error_message(e)}), "
                                "so no optimized model could be checked against it") from None
    try:
        if inputs is None:
            sets, outputs, origin = _random_sets(session, shapes, seed)
        else:
            origin = "given"
            sets = [{k: np.asarray(v) for k, v in inputs.items()} if isinstance(inputs, Mapping)
                    else load_inputs(inputs, session)]
            outputs = _run_all(session, sets)
    except RunInputError as e:
        raise OptimizeError(str(e)) from None
    except _RunFailure as e:
        raise OptimizeError(f"the input model fails on ONNX Runtime with given inputs ({e.described}): {e.error}; give "
                            "other inputs (--inputs) or shapes (--input NAME:DIMS)") from None
    names = [o.name for o in session.get_outputs()]
    return Reference(sets, [dict(zip(names, o)) for o in outputs], origin, signature(model))


class _RunFailure(Exception):
    def __init__(self, described: str, error: str):
        super().__init__(error)
        self.described, self.error = described, error


def _run_all(session, sets: list[dict[str, np.ndarray]], quiet: bool = False) -> list[list[np.ndarray]]:
    """The outputs of each input set; quiet: ONNX Runtime logs nothing when a run fails (a size being tried)."""
    options = ort.RunOptions()
    if quiet:
        options.log_severity_level = 4  # fatal only
    outputs = []
    for feeds in sets:
        try:
            outputs.append(session.run(None, feeds, options))
        except Exception as e:  # noqa: BLE001 - ORT's run errors have no common type
            raise _RunFailure(", ".join(f"{k} {'x'.join(map(str, v.shape))}" for k, v in feeds.items()),
                              ort_error_message(e)) from None
    return outputs


def _is_spatial(info, axis: int) -> bool:
    return axis > 0 and len(info.shape) >= 3 and "float" in info.type


def _random_sets(session, shapes: Mapping[str, list[int]] | None, seed: int):
    """(input sets, their outputs, origin) for random inputs: `shapes` when given; else every dynamic dim at
    DYNAMIC_DIMS, then, if the model fails on those, image-like sizes (SPATIAL_RETRY_DIMS)."""
    infos = session.get_inputs()
    dynamic = any(not isinstance(d, int) for i in infos for d in i.shape)
    origin = f"random (seed {seed})"

    def sized(batch: int, side: int) -> dict[str, list[int]]:
        return {i.name: [d if isinstance(d, int) else (side if _is_spatial(i, a) else batch) for a, d in enumerate(i.shape)]
                for i in infos}

    if shapes or not dynamic:
        plans = [[{**sized(DYNAMIC_DIMS[0], DYNAMIC_DIMS[0]), **dict(shapes or {})}]]
    else:
        plans = [[sized(size, size) for size in DYNAMIC_DIMS]]
        if any(_is_spatial(i, a) for i in infos for a, d in enumerate(i.shape) if not isinstance(d, int)):
            plans += [[sized(b, side) for b, side in zip(BATCH_RETRY_DIMS, sides)] for sides in SPATIAL_RETRY_DIMS]
    failures = []
    for plan in plans:
        sets = [random_inputs(session, plan_shapes, seed) for plan_shapes in plan]
        try:
            outputs = _run_all(session, sets, quiet=True)
        except _RunFailure as e:
            failures.append(e)
            continue
        if failures:  # say which sizes the model could not take
            origin += f" at image-like sizes (it fails on {failures[0].described})"
        return sets, outputs, origin
    tried = "; ".join(e.described for e in failures)
    raise OptimizeError(f"the input model fails on ONNX Runtime with {origin} inputs ({tried}): {failures[0].error}; give "
                        "real inputs (--inputs) or shapes (--input NAME:DIMS)")


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
                    checks.append(compare_output(name, value, want[name], tolerance, labels=LABELS, inputs=k))
        except Exception as e:  # noqa: BLE001
            return checks, f"ONNX Runtime cannot run it: {ort_error_message(e)}"
    failed = [c for c in checks if not c.passed]
    if not failed:
        return checks, None
    c = failed[0]
    where = f" on input set {c.inputs + 1}" if len(reference.feeds) > 1 else ""
    return checks, f"output {c.name!r} differs from the input model's{where}: {c.failure()}"

