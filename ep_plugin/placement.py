"""Which execution provider runs each node of a session, and why OptimEP refused the ones it left."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import onnxruntime as ort

from .loader import EP_NAME


# A unit's name at the start of a step label or after a " + " that joins folded nodes.
_INTEGER_UNIT = re.compile(r"(?:^| \+ )(?:QGemm|QConv|NhwcQConv|QAdd|QMatMul) '")


@dataclass(frozen=True)
class NodePlacement:
    node: str
    op: str
    ep: str
    reason: str = ""  # why OptimEP refused it ("" for nodes OptimEP runs)


@dataclass
class Placement:
    """Where each node of a session runs: `nodes` (one NodePlacement each: node, op, EP, OptimEP's reason for
    refusing it), `isa` (OptimEP's kernels), `compiled` (each fused node's steps), `float_units`, `rewrites` and
    `rewrite_refusals` (OptimEP's graph rewrites inside its partitions). `summary()` prints it; `to_dict()` is
    what `optim run --json` shows."""

    nodes: list[NodePlacement] = field(default_factory=list)
    isa: str = ""  # kernel ISA the session's OptimEP instance uses
    # Per fused node: the steps it was compiled into, e.g. "QGemm 'fc1'" for an integer QDQ unit.
    compiled: dict[str, list[str]] = field(default_factory=dict)
    # MatMul/Gemm nodes OptimEP runs in float inside QDQ graphs, with the reason ("Gemm 'fc': ...").
    float_units: list[str] = field(default_factory=list)
    # OptimEP's graph rewrites inside its partitions (ep_plugin/src/rewrites/): places each rewrote, summed
    # over the partitions, and each candidate left alone with the reason ("channels_last: Conv 'c': ...").
    rewrites: dict[str, int] = field(default_factory=dict)
    rewrite_refusals: list[str] = field(default_factory=list)

    @property
    def integer_units(self) -> int:
        """QDQ units (MatMul/Gemm/Conv/Add) OptimEP runs as integer kernels, folded ones included.

        A step "NhwcQConv 'c' + QAdd 'a'" counts two."""
        return sum(len(_INTEGER_UNIT.findall(s)) for steps in self.compiled.values() for s in steps)

    @property
    def total_nodes(self) -> int:
        return len(self.nodes)

    @property
    def optim_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.ep == EP_NAME)

    @property
    def fallback(self) -> list[NodePlacement]:
        return [n for n in self.nodes if n.ep != EP_NAME]

    @property
    def fraction(self) -> float:
        return self.optim_nodes / self.total_nodes if self.nodes else 1.0

    def to_dict(self) -> dict:
        return {
            "total_nodes": self.total_nodes,
            "optim_nodes": self.optim_nodes,
            "cpu_nodes": self.total_nodes - self.optim_nodes,
            "isa": self.isa,
            "fallback": [{"node": n.node, "op": n.op, "ep": n.ep, "reason": n.reason} for n in self.fallback],
            "integer_units": self.integer_units,
            "compiled": self.compiled,
            "float_units": self.float_units,
        }

    def summary(self) -> str:
        """Human-readable report: counts, then each node left to another EP with the reason."""
        pct = 100.0 * self.fraction
        lines = [f"placement: {self.optim_nodes}/{self.total_nodes} nodes on {EP_NAME} ({pct:.1f}%), "
                 f"{self.total_nodes - self.optim_nodes} on CPU fallback"]
        if self.integer_units:
            lines.append(f"  {self.integer_units} QDQ unit(s) run as integer kernels (GEMM, convolution, Add)")
        for n in self.fallback:
            label = f"{n.op} '{n.node}'" if n.node else n.op
            lines.append(f"  {label} -> {n.ep}: {n.reason or 'no reason recorded'}")
        return "\n".join(lines)


def placement(sess: ort.InferenceSession) -> Placement:
    """Placement of every node of a session made by optim.ep_plugin.session()."""
    report = getattr(sess, "_optim_report", None)
    if report is None:
        raise ValueError("placement() needs a session created by optim.ep_plugin.session()")
    reasons: dict[tuple[str, str], str] = {}
    for graph in report.get("graphs", []):
        for r in graph.get("refused", []):
            reasons[(r["node"], r["op"])] = r["reason"]
    compiled = report.get("compiled", [])
    rewrites: dict[str, int] = {}
    for c in compiled:
        for name, count in c.get("rewrites", {}).items():
            rewrites[name] = rewrites.get(name, 0) + count
    result = Placement(isa=report.get("isa", ""), compiled={c["partition"]: c["steps"] for c in compiled},
                       float_units=[u for c in compiled for u in c.get("float_units", [])], rewrites=rewrites,
                       rewrite_refusals=[r for c in compiled for r in c.get("rewrite_refusals", [])])
    for sub in sess.get_provider_graph_assignment_info():
        for n in sub.get_nodes():
            reason = "" if sub.ep_name == EP_NAME else reasons.get((n.name, n.op_type), "")
            if sub.ep_name != EP_NAME and not reason:
                # ORT's own rewrites after partitioning can create nodes OptimEP never saw.
                reason = "not offered to OptimEP (created by ONNX Runtime after partitioning)"
            result.nodes.append(NodePlacement(node=n.name, op=n.op_type, ep=sub.ep_name, reason=reason))
    return result


__all__ = ["NodePlacement", "Placement", "placement"]
