"""`optim run`: a model once on OptimEP with inputs given or random: outputs, placement, time, and the check
against ONNX Runtime's CPU EP."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort

from optim.common.comparison import OutputCheck, compare_output

from ..inputs import RunInputError, load_inputs, random_inputs
from ..ort_errors import ort_error_message
from ..placement import Placement, placement
from ..sessions import cpu_session, session


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    placement: Placement
    seconds: float  # wall time of one run (after a warm-up run)
    checks: list[OutputCheck] = field(default_factory=list)  # vs the reference, when compared
    reference: str = ""  # what the outputs were compared with

    @property
    def max_abs_error(self) -> float | None:
        return max((c.max_abs for c in self.checks), default=None) if self.checks else None

    @property
    def max_rel_error(self) -> float | None:
        """None when no output has a reference value past atol (a relative error would measure nothing)."""
        return max((c.max_rel for c in self.checks if c.rel_measured), default=None)


def _is_qdq(model: str | os.PathLike | bytes) -> bool:
    """Whether the model holds QuantizeLinear / DequantizeLinear nodes (read without its external weights)."""
    proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model), load_external_data=False)
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in proto.graph.node)


def run_model(
    model: str | os.PathLike | bytes,
    *,
    inputs: dict[str, np.ndarray] | str | os.PathLike | None = None,
    shapes: dict[str, list[int]] | None = None,
    compare_cpu: bool = False,
    threads: int | None = None,
    seed: int = 0,
    **ep_options: str,
) -> RunResult:
    """Runs `model` once on OptimEP (after a warm-up run) and, with compare_cpu, on the CPU EP too: as ONNX Runtime
    optimizes a float model, and with its graph optimizations off for a QDQ model (dequantize, the float op,
    quantize: the graph as written, which OptimEP's integer units equal; the CPU EP's own fused integer kernels
    round, and on CPUs without VNNI saturate, in their own way). `reference` names it."""
    sess = session(model, threads=threads, **ep_options)
    if inputs is None:
        feeds = random_inputs(sess, shapes, seed)
    elif isinstance(inputs, dict):
        feeds = inputs
    else:
        feeds = load_inputs(inputs, sess)
    names = [o.name for o in sess.get_outputs()]
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # a failing run raises with the message; ORT's log line would repeat it
    try:
        sess.run(None, feeds, quiet)  # warm-up: plans and buffers are made on the first run
        t0 = time.perf_counter()
        values = sess.run(None, feeds, quiet)
        seconds = time.perf_counter() - t0
    except Exception as e:
        text = str(e)
        if "INVALID_ARGUMENT" in text or "Invalid" in text:
            raise RunInputError(ort_error_message(e)) from None
        raise
    result = RunResult(dict(zip(names, values)), placement(sess), seconds)
    if compare_cpu:
        qdq = _is_qdq(model)
        result.reference = ("ONNX Runtime's CPU EP, graph optimizations off (the QDQ graph as written)" if qdq
                            else "ONNX Runtime's CPU EP")
        ref = cpu_session(model, threads=threads, optimization="disable" if qdq else "basic").run(None, feeds)
        # Reported, not judged: the figures say how far OptimEP is from the CPU EP under the float tolerance.
        result.checks = [compare_output(name, result.outputs[name], r, labels=("OptimEP", "CPU EP"))
                         for name, r in zip(names, ref)]
    return result
