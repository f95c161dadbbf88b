"""Finding the pass that broke a model: replay the recorded changes one at a time from the
last proven model, proving after each, and name the first change that fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx

from .manager import Step, apply_pass
from .rule import Pass, PassContext


def find_culprit(start: onnx.ModelProto, steps: Sequence[Step], passes: Sequence[Pass],
                 problem_of: Callable[[onnx.ModelProto], str | None]) -> tuple[Step | None, str | None]:
    """The first step whose result `problem_of` rejects, with the problem; (None, None) when every
    step passes alone. Passes are deterministic, and the passes that changed nothing in between
    change nothing on replay either, so the replay retraces the run."""
    by_name = {p.name: p for p in passes}
    model = onnx.ModelProto()
    model.CopyFrom(start)
    ctx = PassContext()
    for step in steps:
        model, _ = apply_pass(by_name[step.pass_name], model, ctx)
        problem = problem_of(model)
        if problem:
            return step, problem
    return None, None
