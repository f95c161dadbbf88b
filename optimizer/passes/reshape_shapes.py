"""Reshape targets assembled at run time from dims the Reshape's own input already has made constant.

Exporters write `view(b, s, heads, d)` as Reshape(x, Concat(Shape(x)[0:2], [heads, d])), or take b
and s from another tensor with the same dims (the token ids), or one dim at a time as
Unsqueeze(Gather(Shape(t), i)) (`t.size(i)` in TorchScript). Reshape's 0 means "copy this dim
from the input", so when every run-time piece is the input's own dim at the same position, the
target becomes the constant [0, 0, heads, d], and the Shape/Slice/Concat nodes become dead.
Dims count as the same when shape inference gives them the same size or the same symbolic name.
"""

from __future__ import annotations

import numpy as np

from ..graph import GraphView, attr
from ..rule import Match, Rule
from .constant_folding import shape_dims, sliced_shape_dims

_CONST, _DIM = "constant", "dim"


class ConstantReshapeShapes(Rule):
    name = "constant_reshape_shapes"
    summary = "Reshape shapes built from the input's own dims (Shape/Slice/Concat) -> a constant (0 = copy the dim)"
    anchors = frozenset({"Reshape"})

    def pattern(self, g: GraphView, node) -> Match | None:
        concat = g.producer_op(node.input[1], "Concat") if len(node.input) > 1 else None
        if concat is None:
            return None
        return Match([node], {"reshape": node, "concat": concat})

    def check(self, g: GraphView, m: Match) -> str | None:
        reshape, concat = m["reshape"], m["concat"]
        found = input_dims_and_pieces(g, reshape, concat, "shape")
        if isinstance(found, str):
            return found
        data, pieces = found
        target = []
        for position, (kind, value) in enumerate(pieces):
            if kind == _CONST or (isinstance(value, int) and value > 0):
                target.append(int(value))  # a constant, or a dim shape inference knows statically
            elif value is not None and position < len(data) and data[position] == value:
                target.append(0)
            else:
                return (f"target dim {position} ({value or 'unknown'}) is not known to equal the input's dim {position} "
                        f"({data[position] if position < len(data) else 'none'})")
        # allowzero=1 reads a 0 as an empty dim. The new target copies dims with 0 and drops the
        # attribute, which is the same exactly when the target has no literal 0 of its own.
        if attr(reshape, "allowzero", 0) and any(kind == _CONST and value == 0 for kind, value in pieces):
            return "allowzero=1 and the shape holds a literal 0 (an empty dim), which a copy (0) cannot express"
        m.values["target"] = target
        return None

    def rewrite(self, g: GraphView, m: Match) -> str:
        reshape, target = m["reshape"], np.array(m["target"], dtype=np.int64)
        hint = f"{m['concat'].output[0]}_constant"
        same = g.constant(hint) if hint in g.initializers else None
        name = hint if same is not None and np.array_equal(same, target) else g.add_initializer(target, hint)
        reshape.input[1] = name  # Reshapes sharing the Concat share the constant
        kept = [a for a in reshape.attribute if a.name != "allowzero"]
        del reshape.attribute[:]
        reshape.attribute.extend(kept)
        g.reindex()
        return f"run-time shape -> constant {target.tolist()}"


def input_dims_and_pieces(g: GraphView, node, concat, what: str) -> tuple[list, list] | str:
    """The dims of `node`'s data input and its `what` (Concat's inputs as (kind, value) entries, see
    _pieces), or why they are not known."""
    data = g.shape(node.input[0])
    if data is None:
        return f"the rank of the {node.op_type}'s input is unknown"
    pieces = []
    for part in concat.input:
        found = _pieces(g, part)
        if found is None:
            return f"{what} piece {part!r} is neither a constant nor dims read by Shape"
        pieces += found
    return data, pieces


def _pieces(g: GraphView, name: str) -> list[tuple[str, object]] | None:
    """A Concat input as (kind, value) entries: constants, or dims (int, dim name, None) of a Shape."""
    value = g.constant(name)
    if value is not None:
        return [(_CONST, int(v)) for v in value.reshape(-1)] if value.dtype.kind == "i" else None
    dims = shape_piece_dims(g, name)
    return None if dims is None else [(_DIM, d) for d in dims]


def shape_piece_dims(g: GraphView, name: str) -> list | None:
    """The dims (ints, dim names, None) a 1-D int64 value holds when it is read off a Shape: the Shape
    itself, a Slice of it, or one dim picked by a scalar Gather and made 1-D by Unsqueeze(axes=[0])."""
    shape = g.producer_op(name, "Shape")
    if shape is not None:
        return shape_dims(g, shape)
    if g.producer_op(name, "Slice") is not None and g.producer_op(g.producer(name).input[0], "Shape") is not None:
        return sliced_shape_dims(g, g.producer(name))
    unsqueeze = g.producer_op(name, "Unsqueeze")
    if unsqueeze is None:
        return None
    axes = g.constant(unsqueeze.input[1]) if len(unsqueeze.input) > 1 else attr(unsqueeze, "axes")
    gather = g.producer_op(unsqueeze.input[0], "Gather")
    if axes is None or [int(a) for a in np.reshape(axes, -1)] not in ([0], [-1]) or gather is None:
        return None
    shape = g.producer_op(gather.input[0], "Shape")
    index = g.constant(gather.input[1])
    dims = shape_dims(g, shape) if shape is not None else None
    if dims is None or index is None or index.ndim != 0 or not -len(dims) <= int(index) < len(dims):
        return None
    return [dims[int(index)]]
