"""LayerNorm written out with ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (and an optional Mul by
a scale, Add of a bias) recognized as one LayerNormalization node.

This is what PyTorch's TorchScript exporter writes below opset 17 and what hand-written or older
models contain: mean = ReduceMean(x); d = x - mean; var = ReduceMean(d^2); y = d / sqrt(var + eps)
* gamma + beta, over trailing axes. Variants: Mul(d, d) for the square, Reciprocal + Mul for the
division. LayerNormalization is an opset-17 op (see opset.py for raising older models).
"""

from __future__ import annotations

import numpy as np
import onnx

from ..graph import GraphView, attr, first, other_input
from ..opset import ensure, needs_problem
from ..rule import Match, Rule


class FuseLayerNorm(Rule):
    name = "fuse_layer_norm"
    summary = "decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) -> LayerNormalization (opset 17)"
    anchors = frozenset({"ReduceMean"})

    def pattern(self, g: GraphView, node) -> Match | None:
        x = node.input[0]
        sub = next((n for n in g.consumers(node.output[0]) if n.op_type == "Sub" and list(n.input) == [x, node.output[0]]), None)
        if sub is None:
            return None
        d = sub.output[0]
        square = next((n for n in g.consumers(d) if (n.op_type == "Pow" and n.input[0] == d)
                       or (n.op_type == "Mul" and list(n.input) == [d, d])), None)
        variance = square and first(g.consumers(square.output[0]), "ReduceMean")
        add_eps = variance and first(g.consumers(variance.output[0]), "Add")
        sqrt = add_eps and first(g.consumers(add_eps.output[0]), "Sqrt")
        if sqrt is None:
            return None
        # edges: (node, the one node of the pattern allowed to read its output)
        edges = [(node, sub), (square, variance), (variance, add_eps), (add_eps, sqrt)]
        divide = next((n for n in g.consumers(d) if n.op_type == "Div" and list(n.input) == [d, sqrt.output[0]]), None)
        if divide is None:  # d * Reciprocal(sqrt(...))
            reciprocal = first(g.consumers(sqrt.output[0]), "Reciprocal")
            divide = reciprocal and next((n for n in g.consumers(d) if n.op_type == "Mul"
                                          and other_input(n, d) == reciprocal.output[0]), None)
            if divide is None:
                return None
            edges += [(sqrt, reciprocal), (reciprocal, divide)]
        else:
            edges.append((sqrt, divide))
        values = {"x": x, "d": d, "readers_of_d": {id(square), id(divide)},
                  "eps": other_input(add_eps, variance.output[0]), "gamma": None, "beta": None,
                  "reduce_means": (node, variance), "square": square}
        last = divide
        for role, op in (("gamma", "Mul"), ("beta", "Add")):
            nxt = first(g.consumers(last.output[0]), op)
            if nxt is None or g.constant(other_input(nxt, last.output[0])) is None:
                break
            values[role] = other_input(nxt, last.output[0])
            edges.append((last, nxt))
            last = nxt
        values.update(edges=edges, last=last)
        return Match([node, sub, square] + [reader for _, reader in edges[1:]], values)

    def check(self, g: GraphView, m: Match) -> str | None:
        x = m["x"]
        if g.dtype(x) != onnx.TensorProto.FLOAT:
            return (f"x {x!r} is not float32 or its type is unknown (LayerNormalization computes in float32 "
                    "and would round other types differently)")
        axes = [_axes(g, n) for n in m["reduce_means"]]
        for a in axes:
            if isinstance(a, str):
                return a
        if axes[0] != axes[1]:
            return f"the two ReduceMeans reduce different axes ({axes[0]} and {axes[1]})"
        dims = g.shape(x)
        rank = None if dims is None else len(dims)
        count = _trailing(axes[0], rank)
        if count is None:
            return f"axes {axes[0]} are not the trailing dims of x (rank {rank if rank is not None else 'unknown'})"
        if dims is None or not all(isinstance(d, int) for d in dims[-count:]):
            return "the normalized dims of x are not known statically"
        m.values.update(axis=-count, normalized_shape=dims[-count:])
        square = m["square"]
        if square.op_type == "Pow" and g.scalar(square.input[1]) != 2.0:
            return f"the square is Pow with exponent {g.scalar(square.input[1])}, not 2"
        eps = g.scalar(m["eps"])
        if eps is None or eps < 0:
            return f"epsilon {m['eps']!r} is not a non-negative one-element constant"
        for role in ("gamma", "beta"):
            if m[role] is not None and not _fits(g.constant(m[role]).shape, m["normalized_shape"], rank):
                return (f"{role} {m[role]!r} of shape {list(g.constant(m[role]).shape)} does not broadcast to the "
                        f"normalized shape {m['normalized_shape']} alone")
        d = m["d"]
        if d in g.outputs:
            return f"{d!r} is a graph output"
        if {id(n) for n in g.consumers(d)} != m["readers_of_d"]:
            return f"{d!r} (x - mean) is read outside the pattern"
        for node, reader in m["edges"]:
            problem = g.private_problem(node.output[0], reader)
            if problem:
                return problem
        return needs_problem(g.model, "LayerNormalization", 17)

    def rewrite(self, g: GraphView, m: Match) -> str:
        note = ensure(g.model, 17)
        shape = m["normalized_shape"]
        inputs = [m["x"], _as_shape(g, m["gamma"], shape, "layer_norm_scale", fill=1.0)]
        if m["beta"] is not None:
            inputs.append(_as_shape(g, m["beta"], shape, "layer_norm_bias", fill=0.0))
        last = m["last"]
        ln = g.make_node("LayerNormalization", inputs, [last.output[0]], last, axis=m["axis"],
                         epsilon=float(g.scalar(m["eps"])))
        g.replace(m.nodes, [ln])
        return f"{len(m.nodes)} nodes -> LayerNormalization {ln.name} over the last {-m['axis']} dim(s){note}"


def _axes(g: GraphView, node) -> list[int] | str:
    """A ReduceMean's axes (attribute before opset 18, input since), or why they do not qualify."""
    if attr(node, "keepdims", 1) != 1:
        return "a ReduceMean does not keep the reduced dims"
    if len(node.input) > 1 and node.input[1]:
        value = g.constant(node.input[1])
        if value is None:
            return "a ReduceMean's axes are not a constant"
        return sorted(int(a) for a in value.reshape(-1))
    axes = attr(node, "axes")
    return sorted(axes) if axes else "a ReduceMean has no axes (it reduces everything)"


def _trailing(axes: list[int], rank: int | None) -> int | None:
    """How many trailing dims `axes` covers, or None when they are not exactly the trailing dims."""
    if not all(a < 0 for a in axes):
        if rank is None:
            return None
        axes = sorted(a - rank if a >= 0 else a for a in axes)
    return len(axes) if axes == list(range(-len(axes), 0)) else None


def _core(shape) -> tuple[int, ...]:
    """The shape without its leading 1s: what a broadcast operand really varies over."""
    dims = list(shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return tuple(dims)


def _fits(shape, normalized: list[int], rank: int) -> bool:
    """Whether multiplying/adding a constant of `shape` acts on the normalized dims only and
    leaves the output shape alone."""
    core = _core(shape)
    return len(shape) <= rank and len(core) <= len(normalized) and (not core or tuple(normalized[-len(core):]) == core)


def _as_shape(g: GraphView, name: str | None, shape: list[int], hint: str, fill: float) -> str:
    """`name` when it already has exactly `shape`, else a new initializer of that shape
    (LayerNormalization takes Scale and B of the normalized shape)."""
    if name is None:
        return g.add_initializer(np.full(shape, fill, dtype=np.float32), hint)
    value = g.constant(name)
    if list(value.shape) == list(shape):
        return name
    return g.add_initializer(np.broadcast_to(value.reshape(_core(value.shape)), shape).astype(value.dtype), hint)
