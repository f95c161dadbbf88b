"""Float fallback for an accuracy target (`optim quantize --target cosine>=0.995`).

1. Quantize everything (calibrated once) and measure the target metric on the held-out batches, on OptimEP.
2. The metric with every quantized node in float: if even that misses the target, stop (FallbackError).
3. Sensitivity, one node at a time: for each quantized node, the metric with only that node quantized
   (an edit of the QDQ model, see qdq_graph.py; a real quantization only where the quantizer reshaped a
   node) — one OptimEP session per node. Measured alone, a node's damage does not hide behind a worse
   one's, which leave-one-out measurements (everything else quantized) let happen.
4. Keep the k most sensitive nodes in float, with k found by doubling (1, 2, 4, ...) then bisection, each
   try a real quantization (cached ranges) measured on OptimEP; the smallest k tried that meets the target wins.
5. Time the float, the int8-everywhere and the resulting model on OptimEP (alternating runs, medians).

If the target is not met with `max_float` nodes (default: every quantized node) in float, FallbackError
says how close it came.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import onnx

from ..errors import OptimizeError
from ..model_io import model_source
from .accuracy import Reference
from .qdq_graph import quantized_nodes, with_nodes_in_float
from .target import Target

LATENCY_SECONDS = 1.0  # of alternating timed runs per comparison (after warm-up)
LATENCY_WARMUP = 2


class FallbackError(OptimizeError):
    """The accuracy target cannot be met within the float budget."""


@dataclass
class Sensitivity:
    node: str
    op_type: str
    value: float  # the target metric with only this node quantized (the other candidates in float)
    loss: float  # the metric with every candidate in float, minus value


@dataclass
class FallbackResult:
    target: str
    met: bool
    int8_value: float  # everything quantized
    final_value: float
    float_value: float | None = None  # every candidate in float
    candidates: int = 0  # quantized nodes measured
    kept_float: list[Sensitivity] = field(default_factory=list)
    sensitivity: list[Sensitivity] = field(default_factory=list)  # every candidate, most sensitive first
    tries: dict[int, float] = field(default_factory=dict)  # nodes in float -> metric measured
    latency_ms: dict[str, float] = field(default_factory=dict)  # "float", "int8" (everything), "final": OptimEP medians
    seconds: float = 0.0

    @property
    def latency_change(self) -> float | None:
        if not {"int8", "final"} <= set(self.latency_ms):
            return None
        return self.latency_ms["final"] / self.latency_ms["int8"] - 1.0

    def summary(self) -> str:
        if not self.kept_float:
            return f"target {self.target} met with every node quantized ({self.final_value:.5f})"
        cost = f": {self.latency_change:+.0%} latency on OptimEP" if self.latency_change is not None else ""
        return (f"target {self.target} met ({self.int8_value:.5f} -> {self.final_value:.5f}), kept "
                f"{len(self.kept_float)} of {self.candidates} quantized nodes in float{cost}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tries"] = {str(k): v for k, v in self.tries.items()}
        d["latency_change"] = self.latency_change
        return d


def _session(model: onnx.ModelProto, **kwargs):
    from optim.ep_plugin import session

    with model_source(model) as source:
        return session(source, **kwargs)


def _measure(model: onnx.ModelProto, target: Target, reference: Reference) -> float:
    from optim.ep_plugin.timing import NO_SPIN  # one session after another: idle threads must not spin

    return target.value(reference.compare("OptimEP", _session(model, config=NO_SPIN)))


def _in_float(qdq: onnx.ModelProto, float_model: onnx.ModelProto, nodes: set[str], quantized: set[str],
              build: Callable[[list[str]], onnx.ModelProto], excluded: list[str]) -> onnx.ModelProto:
    """`qdq` with `nodes` in float: an edit, or a real quantization where the edit cannot say."""
    model = with_nodes_in_float(qdq, float_model, nodes, quantized)
    return model if model is not None else build(excluded + sorted(nodes))


def rank_nodes(qdq: onnx.ModelProto, float_model: onnx.ModelProto, nodes: list[tuple[str, str]], target: Target,
               reference: Reference, float_value: float, build: Callable[[list[str]], onnx.ModelProto],
               excluded: list[str], say: Callable[[str], None]) -> list[Sensitivity]:
    """Each of `nodes` (name, op type) with the metric measured when it alone is quantized, most damaging first."""
    names = {name for name, _ in nodes}
    rows = []
    for k, (name, op_type) in enumerate(nodes, 1):
        value = _measure(_in_float(qdq, float_model, names - {name}, {name}, build, excluded), target, reference)
        rows.append(Sensitivity(name, op_type, value, float_value - value))
        say(f"sensitivity: node {k}/{len(nodes)} {name} ({op_type}): {target.metric} {value:.5f} with only it quantized")
    return sorted(rows, key=lambda s: -s.loss)


def _prefix_sizes(limit: int):
    """1, 2, 4, ... up to limit (then bisection narrows down between the last failure and success)."""
    k = 1
    while k < limit:
        yield k
        k *= 2
    yield limit


def search(target: Target, build: Callable[[list[str]], onnx.ModelProto], float_model: onnx.ModelProto,
           op_types: set[str], reference: Reference, excluded: list[str], max_float: int | None = None,
           progress: Callable[[str], None] | None = None) -> tuple[onnx.ModelProto, FallbackResult]:
    """The quantized model that meets `target` with the fewest float nodes found, and the report.

    build(excluded node names) -> QDQ model (calibrated once); `excluded` stay float in every try;
    op_types: the op types the quantizer quantizes (their nodes are the candidates)."""
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    everything = build(excluded)
    base = _measure(everything, target, reference)
    if target.met(base):
        say(f"target {target} met with every node quantized ({base:.5f})")
        return everything, FallbackResult(str(target), True, base, base, tries={0: base}, seconds=time.perf_counter() - t0)
    nodes = [(name, op) for name, op in quantized_nodes(everything, op_types) if name not in excluded]
    names = {name for name, _ in nodes}
    float_value = _measure(_in_float(everything, float_model, names, set(), build, excluded), target, reference)
    say(f"{target.metric} {base:.5f} with every node quantized, {float_value:.5f} with the {len(nodes)} quantized "
        f"node(s) in float")
    if not target.met(float_value):
        raise FallbackError(
            f"target {target} cannot be met: even with all {len(nodes)} quantized nodes in float, {target.metric} on the "
            f"held-out data is {float_value:.5f} ({base:.5f} with none); nothing written: lower the target")
    ranking = rank_nodes(everything, float_model, nodes, target, reference, float_value, build, excluded, say)
    limit = len(ranking) if max_float is None else min(max_float, len(ranking))
    tries: dict[int, float] = {0: base}
    passing: dict[int, onnx.ModelProto] = {}  # only the smallest k that met the target so far

    def attempt(k: int) -> bool:
        model = build(excluded + [s.node for s in ranking[:k]])
        tries[k] = _measure(model, target, reference)
        met = target.met(tries[k])
        say(f"fallback: {k} node(s) in float: {target.metric} {tries[k]:.5f}" + (" (target met)" if met else ""))
        if met:
            passing.clear()
            passing[k] = model
        return met

    low, high = 0, None  # largest k known to fail, smallest known to pass
    for k in _prefix_sizes(limit) if limit else []:
        if attempt(k):
            high = k
            break
        low = k
    if high is None:
        best = max(tries, key=tries.get)
        raise FallbackError(
            f"target {target} cannot be met: with the {limit} most sensitive of {len(ranking)} quantized nodes in float "
            f"the best {target.metric} on the held-out data is {tries[best]:.5f} ({best} in float; {base:.5f} with "
            f"none); nothing written: lower the target, give calibration data closer to the real inputs"
            + (", or raise --max-float" if limit < len(ranking) else ""))
    while high - low > 1:
        mid = (low + high) // 2
        if attempt(mid):
            high = mid
        else:
            low = mid
    final = passing[high]
    latency = compare_latency({"float": float_model, "int8": everything, "final": final}, reference.batches[0])
    result = FallbackResult(str(target), True, base, tries[high], float_value, len(ranking), ranking[:high], ranking,
                            tries, latency, time.perf_counter() - t0)
    say(result.summary())
    return final, result


def compare_latency(models: dict[str, onnx.ModelProto], feeds: dict) -> dict[str, float]:
    """Median milliseconds per run of each model on OptimEP, runs alternating between them."""
    from optim.ep_plugin.timing import NO_SPIN, time_alternating

    sessions = {name: _session(m, config=NO_SPIN) for name, m in models.items()}
    times = time_alternating(sessions, feeds, LATENCY_WARMUP, runs=5, duration=LATENCY_SECONDS)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}
