"""The first step of optimize: onnxsim's constant folding and shape inference, run in a child
process and adopted only when its result passes the same proof as our passes.

Any failure leaves the model as it was, with the reason in the report, and optimize goes on with
its own passes: onnxsim missing, raising, crashing (it is C++; the child process dies, not us),
running past the timeout, changing the signature, growing the graph, or changing the outputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from optim.common.comparison import Tolerance

from .model_io import INLINE_LIMIT
from .proof import Reference, prove, signature

SIMPLIFY_TIMEOUT_S = 600
_CHILD = Path(__file__).with_name("_onnxsim_child.py")


class SimplifyFailed(RuntimeError):
    """onnxsim produced no model; the message says why."""


@dataclass
class SimplifyReport:
    status: str  # "used", "discarded" (ran, result not adopted), "failed", "off"
    reason: str = ""
    seconds: float = 0.0
    nodes_before: int = 0
    nodes_after: int | None = None


def run_onnxsim(model: onnx.ModelProto, timeout: float = SIMPLIFY_TIMEOUT_S) -> onnx.ModelProto:
    """onnxsim's simplification of `model`, computed in a child process. Raises SimplifyFailed."""
    with tempfile.TemporaryDirectory(prefix="optim-onnxsim-") as folder:
        source, target = os.path.join(folder, "in.onnx"), os.path.join(folder, "out.onnx")
        onnx.save_model(model, source, save_as_external_data=model.ByteSize() > INLINE_LIMIT, location="in.onnx.data")
        # First without torch (faster start); again with it if this onnxsim cannot do without.
        for block_torch in ("1", "0"):
            env = dict(os.environ, OPTIM_ONNXSIM_NO_TORCH=block_torch)
            try:
                done = subprocess.run([sys.executable, str(_CHILD), source, target], env=env, capture_output=True,
                                      text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise SimplifyFailed(f"onnxsim took longer than {timeout:g} s") from None
            if done.returncode != 3 or block_torch == "0":
                break
        if done.returncode < 0:
            raise SimplifyFailed(f"onnxsim crashed (signal {-done.returncode})")
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise SimplifyFailed(lines[-1] if lines else f"onnxsim exited with status {done.returncode}")
        return onnx.load(target)


def simplify(model: onnx.ModelProto, reference: Reference, tolerance: Tolerance,
             runner: Callable[[onnx.ModelProto], onnx.ModelProto] = run_onnxsim) -> tuple[onnx.ModelProto, SimplifyReport]:
    """onnxsim's result when it passes the proof, else `model` unchanged; and what happened."""
    t0 = time.perf_counter()
    report = SimplifyReport("discarded", nodes_before=len(model.graph.node))
    try:
        simplified = runner(model)
    except SimplifyFailed as e:
        report.status, report.reason = "failed", str(e)
    else:
        report.nodes_after = len(simplified.graph.node)
        report.reason = _adopt(model, simplified, reference, tolerance)
        if not report.reason:
            report.status = "used"
            model = simplified
    report.seconds = time.perf_counter() - t0
    return model, report


def _adopt(original: onnx.ModelProto, simplified: onnx.ModelProto, reference: Reference, tolerance: Tolerance) -> str:
    """Makes onnxsim's result carry the original's declared signature and metadata; returns why it
    must not be used ('' when it may)."""
    names = [[v.name for v in g.input] + ["->"] + [v.name for v in g.output] for g in (original.graph, simplified.graph)]
    if names[0] != names[1]:
        return "onnxsim changed the model's inputs or outputs"
    # onnxsim renames symbolic output dims and adds its own metadata: keep the user's.
    for field in ("input", "output"):
        del getattr(simplified.graph, field)[:]
        getattr(simplified.graph, field).extend(getattr(original.graph, field))
    del simplified.metadata_props[:]
    simplified.metadata_props.extend(original.metadata_props)
    if len(simplified.graph.node) > len(original.graph.node):
        return f"onnxsim's result has more nodes ({len(simplified.graph.node)} > {len(original.graph.node)})"
    if signature(simplified) != reference.signature:
        return "onnxsim changed the types of the model's inputs or outputs"
    proof = prove(simplified, reference, tolerance)
    return f"onnxsim's result failed the proof: {proof.problem}" if proof.problem else ""
