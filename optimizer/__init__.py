"""ONNX model -> smaller, simpler ONNX model, proven to compute the same outputs.

    from optim.optimizer import optimize
    result = optimize("model.onnx", "model.opt.onnx")       # onnxsim, then our passes, then the proof
    print("\\n".join(format_report(result)))                # op counts before/after, time per pass
    optimize("model.onnx", "out.onnx", skip=["fuse_gelu"], simplify=False, inputs="x.npz")

Every pass is pattern / check / rewrite with a reason for each refusal (result.events). A result
that fails the proof raises ProofError naming the pass that caused it; nothing is written then.
Needs onnx, onnxruntime and numpy; onnxsim (the `optimize` extra) for the first step.
"""

from optim.common.comparison import (
    DEFAULT_TOLERANCE,
    FLOAT_ATOL,
    FLOAT_RTOL,
    HALF_ATOL,
    HALF_RTOL,
    OutputCheck,
    Tolerance,
)

from .errors import OptimizeError, ProofError
from .manager import DEFAULT_MAX_ROUNDS, PassStats
from .passes import PASS_NAMES, PASSES
from .pipeline import optimize
from .report import OptimizeResult, format_report, op_counts
from .rule import Event, Match, Pass, PassContext, Rule
from .simplify import SimplifyFailed, SimplifyReport

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_TOLERANCE",
    "FLOAT_ATOL",
    "FLOAT_RTOL",
    "HALF_ATOL",
    "HALF_RTOL",
    "PASSES",
    "PASS_NAMES",
    "Event",
    "Match",
    "OptimizeError",
    "OptimizeResult",
    "OutputCheck",
    "Pass",
    "PassContext",
    "PassStats",
    "ProofError",
    "Rule",
    "SimplifyFailed",
    "SimplifyReport",
    "Tolerance",
    "format_report",
    "op_counts",
    "optimize",
]
