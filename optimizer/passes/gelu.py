"""The exact GELU written out, x * 0.5 * (1 + erf(x / sqrt(2))), recognized as one Gelu node.

PyTorch's exporters write it as Div(x, 1.414) -> Erf -> Add(1) followed by two Muls grouped any
way: (x * (1 + erf)) * 0.5 (TorchScript), x * (0.5 * (1 + erf)) (dynamo), (x * 0.5) * (1 + erf);
the scaling may be Mul by 0.707 instead of Div. Gelu is an opset-20 op: older models have their
opset raised when every op in them keeps its meaning (see opset.py), and are refused otherwise.
"""

from __future__ import annotations

import math

import onnx

from ..graph import GraphView, first, other_input
from ..opset import ensure, needs_problem
from ..rule import Match, Rule

_T = onnx.TensorProto
# Gelu's element types with their machine epsilon: constants must equal 0.5, 1 and sqrt(2) up to
# the rounding of their type.
_EPSILON = {_T.FLOAT: 2.0**-23, _T.DOUBLE: 2.0**-52, _T.FLOAT16: 2.0**-10, _T.BFLOAT16: 2.0**-7}


class FuseGelu(Rule):
    name = "fuse_gelu"
    summary = "x * 0.5 * (1 + erf(x / sqrt(2))) in any operand order -> Gelu (opset 20)"
    anchors = frozenset({"Erf"})

    def pattern(self, g: GraphView, node) -> Match | None:
        scale = g.producer_op(node.input[0], "Div", "Mul")
        if scale is None:
            return None
        if scale.op_type == "Div":
            x, scale_const = scale.input
        else:
            consts = [k for k in (0, 1) if g.constant(scale.input[k]) is not None]
            if len(consts) != 1:
                return None
            scale_const, x = scale.input[consts[0]], scale.input[1 - consts[0]]
        add = first(g.consumers(node.output[0]), "Add")
        m1 = add and first(g.consumers(add.output[0]), "Mul")
        if m1 is None:
            return None
        u = add.output[0]
        p = other_input(m1, u)
        half_node = g.producer_op(p, "Mul")
        values = {"x": x, "scale": scale, "scale_const": scale_const, "one": other_input(add, node.output[0])}
        if p == x:  # (x * (1 + erf)) * 0.5
            m2 = first(g.consumers(m1.output[0]), "Mul")
            if m2 is None:
                return None
            values.update(half=other_input(m2, m1.output[0]), chain=[scale, node, add, m1, m2])
        elif half_node is not None and x in half_node.input:  # (x * 0.5) * (1 + erf)
            values.update(half=other_input(half_node, x), chain=[scale, node, add, m1], half_node=half_node)
        else:  # x * (0.5 * (1 + erf))
            m2 = next((n for n in g.consumers(m1.output[0]) if n.op_type == "Mul" and other_input(n, m1.output[0]) == x), None)
            if m2 is None:
                return None
            values.update(half=p, chain=[scale, node, add, m1, m2])
        nodes = values["chain"] + ([values["half_node"]] if "half_node" in values else [])
        return Match(nodes, values)

    def check(self, g: GraphView, m: Match) -> str | None:
        x, chain = m["x"], m["chain"]
        dtype = g.dtype(x)
        if dtype not in _EPSILON:
            return f"x {x!r} is not a float tensor (or its type is unknown)"
        eps = 4 * _EPSILON[dtype]
        expected_scale = math.sqrt(2) if m["scale"].op_type == "Div" else 1 / math.sqrt(2)
        for role, name, want in (("erf scale", m["scale_const"], expected_scale), ("1", m["one"], 1.0), ("0.5", m["half"], 0.5)):
            value = g.scalar(name)
            if value is None:
                return f"the {role} operand {name!r} is not a one-element constant"
            if abs(value - want) > eps * want:
                return f"the {role} operand is {value:.8g}, not {want:.8g}"
            problem = _broadcast_problem(g, name, x)
            if problem:
                return problem
        for node, reader in zip(chain, chain[1:]):
            problem = g.private_problem(node.output[0], reader)
            if problem:
                return problem
        if "half_node" in m.values:
            problem = g.private_problem(m["half_node"].output[0], chain[-1])
            if problem:
                return problem
        return needs_problem(g.model, "Gelu", 20)

    def rewrite(self, g: GraphView, m: Match) -> str:
        note = ensure(g.model, 20)
        out = m["chain"][-1].output[0]
        gelu = g.make_node("Gelu", [m["x"]], [out], m["chain"][-1])
        g.replace(m.nodes, [gelu])
        return f"{len(m.nodes)} nodes -> Gelu {gelu.name}{note}"


def _broadcast_problem(g: GraphView, const: str, x: str) -> str | None:
    # A one-element constant of rank r leaves x's shape alone only if x has at least r dims.
    rank = g.constant(const).ndim
    x_rank = g.rank(x)
    if rank and (x_rank is None or x_rank < rank):
        return f"constant {const!r} has {rank} dims and x's rank is {'unknown' if x_rank is None else x_rank}"
    return None
