"""optimize(): load, simplify, run the passes to a fixed point, prove, write."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

from optim.common.comparison import DEFAULT_TOLERANCE, Tolerance
from optim.ep_plugin.inputs import RunInputError, read_npz

from .culprit import find_culprit
from .errors import OptimizeError, ProofError
from .freeze import freeze_inputs
from .manager import DEFAULT_MAX_ROUNDS, Step, run_passes, select_passes
from .model_io import load_model, model_source, save_model
from .opset import default_opset
from .proof import Reference, make_reference, prove
from .report import OptimizeResult, op_counts
from .rule import Pass, PassContext
from .simplify import SimplifyReport, run_onnxsim, simplify as simplify_step


def optimize(
    model: str | os.PathLike | bytes | onnx.ModelProto,
    output: str | os.PathLike | None = None,
    *,
    skip: Sequence[str] = (),
    only: Sequence[str] = (),
    simplify: bool = True,
    inputs: Mapping[str, np.ndarray] | str | os.PathLike | None = None,
    shapes: Mapping[str, list[int]] | None = None,
    freeze: Mapping[str, object] | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    seed: int = 0,
    check_each_pass: bool = False,
    passes: Sequence[Pass] | None = None,
    simplifier: Callable[[onnx.ModelProto], onnx.ModelProto] = run_onnxsim,
) -> OptimizeResult:
    """Simplifies `model` (onnxsim) and runs the rewrite passes to a fixed point, then proves the
    result: onnx.checker's full check, the same signature, and the same outputs as `model` on
    ONNX Runtime's CPU EP within `tolerance`, on `inputs` (arrays by name or an .npz path) or
    random ones (`shapes` sets dynamic dims). Writes `output` only when the proof passes.

    `freeze` fixes inputs to values ({name: number, its text, or array}): they become constants, the If nodes
    and shape logic they decide fold away, and the optimized model no longer takes them (the proof then holds
    it to the input model fed those values).

    `skip` / `only` pick passes by name (see PASS_NAMES); `passes` replaces the standard list
    (tests inject broken ones); `check_each_pass` proves after every change (slower, for
    debugging). The input model is never modified.

    Raises OptimizeError for what the user can fix and ProofError, naming the pass, when the
    optimized model fails the proof; no file is written then.
    """
    t0 = time.perf_counter()
    chosen = select_passes(skip, only, passes)
    original, external = load_model(model)
    _require_valid(original)
    original, frozen = freeze_inputs(original, freeze or {})
    if frozen and isinstance(inputs, Mapping):
        inputs = {k: v for k, v in inputs.items() if k not in frozen}
    elif frozen and inputs is not None:  # an .npz path
        try:
            inputs = {k: v for k, v in read_npz(inputs).items() if k not in frozen}
        except RunInputError as e:
            raise OptimizeError(str(e)) from None
    reference = make_reference(original, inputs, shapes, seed)
    work = onnx.ModelProto()
    work.CopyFrom(original)
    if simplify:
        work, simplified = simplify_step(work, reference, tolerance, runner=simplifier)
    else:
        simplified = SimplifyReport("off", nodes_before=len(original.graph.node))
    start = onnx.ModelProto()
    start.CopyFrom(work)  # the last proven model: where a bisection starts
    ctx = PassContext()
    after_step = (lambda m, step: _prove_step(m, step, reference, tolerance, ctx)) if check_each_pass else None
    run = run_passes(work, chosen, ctx, max_rounds=max_rounds, after_step=after_step)
    proof = prove(run.model, reference, tolerance)
    if not proof.passed:
        step, problem = find_culprit(start, run.steps, chosen, lambda m: prove(m, reference, tolerance).problem)
        raise _proof_error(step, problem or proof.problem, ctx)
    written = None
    if output is not None:
        save_model(run.model, output, external)
        written = str(output)
    return OptimizeResult(
        model=run.model, output=written, simplify=simplified, passes=list(run.stats.values()), rounds=run.rounds,
        converged=run.converged, ops_before=op_counts(original), ops_after=op_counts(run.model),
        size_before=original.ByteSize(), size_after=run.model.ByteSize(), opset_before=default_opset(original),
        opset_after=default_opset(run.model), proof=proof,
        proof_inputs=f"{reference.source} inputs ({reference.describe_inputs()})",
        seconds=time.perf_counter() - t0, events=ctx.events, frozen=frozen)


def _require_valid(model: onnx.ModelProto) -> None:
    # The proof holds the result to onnx.checker's full check; an input that fails it would be
    # blamed on the first pass.
    with model_source(model) as source:
        try:
            onnx.checker.check_model(source, full_check=True)
        except Exception as e:  # noqa: BLE001
            raise OptimizeError(f"the input model fails onnx.checker ({str(e).strip().splitlines()[0]}); "
                                "optimize only rewrites valid models") from None


def _prove_step(model: onnx.ModelProto, step: Step, reference: Reference, tolerance: Tolerance, ctx: PassContext) -> None:
    problem = prove(model, reference, tolerance).problem
    if problem:
        raise _proof_error(step, problem, ctx)


def _proof_error(step: Step | None, problem: str, ctx: PassContext) -> ProofError:
    if step is None:
        message = (f"the optimized model failed the proof ({problem}), but no single pass reproduces it; "
                   "nothing was written")
        return ProofError(message, "", problem, ctx.events)
    message = f"pass {step.pass_name!r} (round {step.round}) broke the model: {problem}; nothing was written"
    return ProofError(message, step.pass_name, problem, ctx.events)
