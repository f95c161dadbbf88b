"""Consecutive Reshapes collapsed into the last one; Reshapes to the shape their input already has dropped."""

from __future__ import annotations

import math

from ..graph import GraphView, attr
from ..rule import Match, Rule


class CollapseReshapes(Rule):
    name = "collapse_reshapes"
    summary = "skip a Reshape whose only reader is another Reshape; drop Reshapes that keep the shape"
    anchors = frozenset({"Reshape"})

    def pattern(self, g: GraphView, node) -> Match | None:
        inner = g.producer_op(node.input[0], "Reshape")
        if inner is not None:
            return Match([inner], {"inner": inner, "outer": node})
        target = _resolved_target(g, node)
        if target is not None and target == g.shape(node.input[0]):
            return Match([node], {"inner": None, "outer": node})
        return None

    def check(self, g: GraphView, m: Match) -> str | None:
        inner, outer = m["inner"], m["outer"]
        if inner is None:
            return g.bypass_problem(outer.input[0], outer.output[0])
        problem = g.private_problem(inner.output[0], outer)
        if problem:
            return problem
        if not attr(outer, "allowzero", 0):
            shape = g.constant(outer.input[1])
            if shape is None:
                return "the second Reshape's shape is not a constant (a 0 in it would copy a dim of the first's output)"
            if (shape == 0).any():
                return "the second Reshape's shape copies dims (0) from the first Reshape's output"
        return None

    def rewrite(self, g: GraphView, m: Match) -> str:
        inner, outer = m["inner"], m["outer"]
        if inner is None:
            g.replace([outer])
            g.bypass(outer.input[0], outer.output[0])
            return "removed a Reshape to the shape its input already has"
        source = inner.input[0]
        g.replace([inner])
        outer.input[0] = source
        g.reindex()
        return f"Reshape -> Reshape: the second now reads {source!r}"


def _resolved_target(g: GraphView, node) -> list[int] | None:
    """The output shape of a Reshape when its input shape is static and its shape a constant."""
    dims = g.shape(node.input[0])
    shape = g.constant(node.input[1]) if len(node.input) > 1 else None
    if dims is None or shape is None or not all(isinstance(d, int) for d in dims) or shape.ndim != 1:
        return None
    target = [dims[i] if d == 0 and not attr(node, "allowzero", 0) and i < len(dims) else int(d)
              for i, d in enumerate(shape.tolist())]
    if target.count(-1) == 1:
        known = math.prod(d for d in target if d != -1)
        if known == 0:
            return None
        target[target.index(-1)] = math.prod(dims) // known
    return target if -1 not in target else None
