"""Consecutive Transposes collapsed into one (or none, when they cancel); identity Transposes dropped."""

from __future__ import annotations

from ..graph import GraphView, attr
from ..rule import Match, Rule


class CollapseTransposes(Rule):
    name = "collapse_transposes"
    summary = "merge Transpose -> Transpose into one Transpose, drop Transposes that do nothing"
    anchors = frozenset({"Transpose"})

    def pattern(self, g: GraphView, node) -> Match | None:
        inner = g.producer_op(node.input[0], "Transpose")
        if inner is not None:
            return Match([inner, node], {"inner": inner, "outer": node, "source": inner.input[0]})
        perm = attr(node, "perm")
        if perm is not None and list(perm) == list(range(len(perm))):
            return Match([node], {"inner": None, "outer": node, "source": node.input[0]})
        return None

    def check(self, g: GraphView, m: Match) -> str | None:
        inner, outer = m["inner"], m["outer"]
        if inner is not None:
            problem = g.private_problem(inner.output[0], outer)
            if problem:
                return problem
            perms = [_perm(g, n) for n in (inner, outer)]
            if None in perms:
                return "a Transpose has no perm and the rank of its input is unknown"
            m.values["perm"] = [perms[0][i] for i in perms[1]]
        else:
            m.values["perm"] = list(attr(outer, "perm"))
        if m["perm"] == list(range(len(m["perm"]))):
            return g.bypass_problem(m["source"], outer.output[0])
        return None

    def rewrite(self, g: GraphView, m: Match) -> str:
        outer, perm = m["outer"], m["perm"]
        if perm == list(range(len(perm))):
            g.replace(m.nodes)
            g.bypass(m["source"], outer.output[0])
            return f"removed {len(m.nodes)} Transpose(s) that cancel out"
        merged = g.make_node("Transpose", [m["source"]], [outer.output[0]], outer, perm=perm)
        g.replace(m.nodes, [merged])
        return f"two Transposes -> one with perm {perm}"


def _perm(g: GraphView, node) -> list[int] | None:
    perm = attr(node, "perm")
    if perm is not None:
        return list(perm)
    rank = g.rank(node.input[0])  # no perm means: reverse the dims
    return None if rank is None else list(range(rank))[::-1]
