"""What an optimize run did: op counts before and after, time per pass, sizes, the simplification
step and the proof, as a table for people and a dict for --json."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import onnx

from .manager import PassStats
from .proof import Proof
from .rule import Event
from .simplify import SimplifyReport


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Nodes of the main graph per op type (custom domains prefixed: 'com.microsoft.FusedGemm')."""
    return dict(Counter(f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
                        for n in model.graph.node))


@dataclass
class OptimizeResult:
    """The outcome of optimize(). `model` is the optimized ModelProto (not in to_dict()); `output`
    the file written (None when no output was asked for); sizes are serialized bytes including
    weights; `proof_inputs` describes the inputs both models ran on."""

    model: onnx.ModelProto
    output: str | None
    simplify: SimplifyReport
    passes: list[PassStats]
    rounds: int
    converged: bool
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    size_before: int
    size_after: int
    opset_before: int
    opset_after: int
    proof: Proof
    proof_inputs: str
    seconds: float
    events: list[Event] = field(default_factory=list)
    frozen: dict[str, str] = field(default_factory=dict)  # inputs fixed by --freeze: name -> value shown

    @property
    def nodes_before(self) -> int:
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        return sum(self.ops_after.values())

    def rewrites(self, pass_name: str) -> int:
        return next((p.rewrites for p in self.passes if p.name == pass_name), 0)

    def to_dict(self) -> dict:
        """Plain JSON-ready data (non-finite numbers become None)."""
        data = {k: v for k, v in asdict(self).items() if k not in ("model", "events")}
        data.update(nodes_before=self.nodes_before, nodes_after=self.nodes_after,
                    events=[asdict(e) for e in self.events])
        data["proof"]["passed"] = self.proof.passed
        return _finite(data)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def format_report(result: OptimizeResult) -> list[str]:
    """The human report: simplification, op-count table, passes, sizes, proof."""
    s = result.simplify
    lines = [f"simplify (onnxsim): {s.status}" + (f" ({s.nodes_before} -> {s.nodes_after} nodes)" if s.status == "used" else "")
             + (f": {s.reason}" if s.reason else "") + (f" [{s.seconds:.2f} s]" if s.status != "off" else "")]
    ops = sorted(set(result.ops_before) | set(result.ops_after))
    width = max([len("op"), len("total")] + [len(op) for op in ops])
    lines.append(f"{'op':<{width}}  {'before':>6}  {'after':>6}  {'change':>6}")
    for op in ops:
        before, after = result.ops_before.get(op, 0), result.ops_after.get(op, 0)
        lines.append(f"{op:<{width}}  {before:>6}  {after:>6}  {_delta(after - before):>6}")
    lines.append(f"{'total':<{width}}  {result.nodes_before:>6}  {result.nodes_after:>6}  "
                 f"{_delta(result.nodes_after - result.nodes_before):>6}")
    lines.append(f"passes ({result.rounds} round{'s' if result.rounds != 1 else ''}"
                 + ("" if result.converged else ", stopped at the cap before a fixed point") + "):")
    pw = max(len(p.name) for p in result.passes) if result.passes else 0
    for p in result.passes:
        lines.append(f"  {p.name:<{pw}}  {p.rewrites:>4} rewrites  {p.refusals:>4} refused  {p.seconds * 1e3:8.1f} ms")
    if result.opset_after != result.opset_before:
        lines.append(f"opset: {result.opset_before} -> {result.opset_after}")
    lines.append(f"model size: {_mb(result.size_before)} -> {_mb(result.size_after)}")
    if result.frozen:
        lines.append("frozen (no longer inputs): " + ", ".join(f"{k}={v}" for k, v in result.frozen.items()))
    worst = max((c.max_abs for c in result.proof.checks), default=0.0)
    lines.append(f"proof: passed on {result.proof_inputs}: onnx.checker full check, same signature, "
                 f"{len(result.proof.checks)} output check(s) within tolerance (max abs error {worst:.3g}) "
                 f"[{result.proof.seconds:.2f} s]")
    if result.output:
        lines.append(f"written to {result.output}")
    return lines


def _delta(n: int) -> str:
    return f"{n:+d}" if n else "0"


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"
