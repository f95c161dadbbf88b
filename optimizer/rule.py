"""What a pass is, and the pattern / check / rewrite form most passes take.

A pass takes a model and returns (model, modified); it records every rewrite it made and every
candidate it refused, with the reason, in the PassContext (`optim optimize -v` prints them).
A Rule finds candidates with pattern(), asks check() whether rewriting is legal (a reason string
when not), and rewrite()s the legal ones, one at a time, until no candidate is left.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import onnx

from .graph import GraphView, ValueInfos, node_label
from .shapes import infer_value_infos


@dataclass(frozen=True)
class Event:
    """One rewrite made or one candidate refused by a pass."""

    pass_name: str
    kind: str  # "rewrite" or "refusal"
    node: str
    message: str

    def __str__(self) -> str:
        verb = "rewrote" if self.kind == "rewrite" else "refused"
        return f"{self.pass_name}: {verb} {self.node}: {self.message}"


@dataclass
class PassContext:
    """Shared by the passes of one optimize run: events, counters and cached shape inference."""

    events: list[Event] = field(default_factory=list)
    rewrites: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)
    _seen: set = field(default_factory=set)
    _infos: ValueInfos | None = None

    def rewrote(self, pass_name: str, node: onnx.NodeProto | str, message: str) -> None:
        label = node if isinstance(node, str) else node_label(node)
        self.rewrites[pass_name] += 1
        self.events.append(Event(pass_name, "rewrite", label, message))

    def refused(self, pass_name: str, node: onnx.NodeProto | str, reason: str) -> None:
        # A fixed point revisits the same refused candidates on every round: record each once.
        label = node if isinstance(node, str) else node_label(node)
        if (pass_name, label, reason) in self._seen:
            return
        self._seen.add((pass_name, label, reason))
        self.refusals[pass_name] += 1
        self.events.append(Event(pass_name, "refusal", label, reason))

    def value_infos(self, model: onnx.ModelProto) -> ValueInfos:
        """Inferred ValueInfos, reused until a pass changes the model (see invalidate())."""
        if self._infos is None:
            self._infos = infer_value_infos(model)
        return self._infos

    def invalidate(self) -> None:
        self._infos = None

    def view(self, model: onnx.ModelProto) -> GraphView:
        return GraphView(model, lambda: self.value_infos(model))


class Pass:
    """A model-to-model transformation that must not change what the model computes."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        raise NotImplementedError


@dataclass
class Match:
    """What a pattern found: `nodes` are the nodes a rewrite replaces; `values` are the rule's
    named pieces (tensors, constants, attributes)."""

    nodes: list[onnx.NodeProto]
    values: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


class Rule(Pass):
    """pattern -> check -> rewrite, anchored at nodes whose op type is in `anchors`."""

    anchors: ClassVar[frozenset[str]]

    def pattern(self, g: GraphView, node: onnx.NodeProto) -> Match | None:
        """The candidate anchored at `node`, or None when the structure does not match."""
        raise NotImplementedError

    def check(self, g: GraphView, m: Match) -> str | None:
        """Why the candidate must not be rewritten, or None when rewriting keeps the outputs."""
        raise NotImplementedError

    def rewrite(self, g: GraphView, m: Match) -> str:
        """Rewrites the candidate; returns one line saying what it did."""
        raise NotImplementedError

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        g = ctx.view(model)
        count = 0
        # Every rewrite removes nodes, so this terminates; the cap guards against a rule that does not.
        for _ in range(4 * len(g.nodes) + 1):
            for node in g.nodes:
                if node.op_type not in self.anchors or not g.is_default_domain(node):
                    continue
                m = self.pattern(g, node)
                if m is None:
                    continue
                reason = self.check(g, m)
                if reason:
                    ctx.refused(self.name, node, reason)
                    continue
                label = node_label(node)
                ctx.rewrote(self.name, label, self.rewrite(g, m))
                count += 1
                break  # the node list changed: scan again
            else:
                break
        return model, count > 0
