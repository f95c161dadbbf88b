"""The pass manager: runs passes in rounds until a round changes nothing (a fixed point), or until a
cap on rounds, timing each pass and recording which pass changed the model in which round, so
that a failed proof can replay the changes one at a time (culprit.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import onnx

from .errors import OptimizeError
from .graph import prune_value_info
from .passes import PASS_NAMES, PASSES
from .rule import Pass, PassContext

DEFAULT_MAX_ROUNDS = 10


@dataclass
class PassStats:
    name: str
    rewrites: int = 0
    refusals: int = 0
    seconds: float = 0.0
    runs: int = 0


@dataclass(frozen=True)
class Step:
    """One pass run that changed the model."""

    round: int
    pass_name: str


@dataclass
class PassRun:
    model: onnx.ModelProto
    steps: list[Step] = field(default_factory=list)
    stats: dict[str, PassStats] = field(default_factory=dict)
    rounds: int = 0
    converged: bool = True


def select_passes(skip: Sequence[str] = (), only: Sequence[str] = (), passes: Sequence[Pass] | None = None) -> list[Pass]:
    """The passes to run, in order: all of `passes` (default: the standard ones), or only those
    named in `only`, minus those in `skip`. Names may use '-' for '_'. Raises OptimizeError naming
    the known passes when a name is unknown."""
    chosen = list(passes) if passes is not None else [p() for p in PASSES]
    known = [p.name for p in chosen]
    wanted = {}
    for option, names in (("--skip", skip), ("--only", only)):
        normalized = [n.replace("-", "_") for n in names]
        unknown = [n for n in normalized if n not in known]
        if unknown:
            raise OptimizeError(f"no pass named {unknown[0]!r} ({option}); passes are {', '.join(known)}")
        wanted[option] = set(normalized)
    if only:
        chosen = [p for p in chosen if p.name in wanted["--only"]]
    return [p for p in chosen if p.name not in wanted["--skip"]]


def apply_pass(p: Pass, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
    """One pass run, plus the bookkeeping every change needs: stale shape information dropped."""
    model, modified = p.run(model, ctx)
    if modified:
        prune_value_info(model.graph)
        ctx.invalidate()
    return model, modified


def run_passes(model: onnx.ModelProto, passes: Sequence[Pass], ctx: PassContext, *,
               max_rounds: int = DEFAULT_MAX_ROUNDS,
               after_step: Callable[[onnx.ModelProto, Step], None] | None = None) -> PassRun:
    """Runs `passes` over `model` (changed in place) in rounds until nothing changes or
    `max_rounds` rounds ran. `after_step` (debug runs) sees the model after every change and may
    raise to stop the run."""
    result = PassRun(model, stats={p.name: PassStats(p.name) for p in passes})
    for round_ in range(1, max_rounds + 1):
        result.rounds = round_
        changed = False
        for p in passes:
            before = (ctx.rewrites[p.name], ctx.refusals[p.name])
            t0 = time.perf_counter()
            model, modified = apply_pass(p, model, ctx)
            stats = result.stats[p.name]
            stats.seconds += time.perf_counter() - t0
            stats.runs += 1
            stats.rewrites += ctx.rewrites[p.name] - before[0]
            stats.refusals += ctx.refusals[p.name] - before[1]
            if modified:
                changed = True
                step = Step(round_, p.name)
                result.steps.append(step)
                if after_step:
                    after_step(model, step)
        if not changed:
            break
    else:
        result.converged = False
    result.model = model
    return result


__all__ = ["DEFAULT_MAX_ROUNDS", "PASS_NAMES", "PassRun", "PassStats", "Step", "apply_pass", "run_passes", "select_passes"]
