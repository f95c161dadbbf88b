"""A zero Pad of the spatial dims folded into the Conv that reads it: Conv(Pad(x), W) = Conv(x, W) with
the Pad's amounts added to the Conv's pads. TensorFlow-style exports (and transformers' MobileNets) write
"same" padding as an explicit Pad before every Conv; folded, the Conv pads inside its own kernel (and a
quantizer sees one unit, not a Pad of dequantized values between Q/DQ pairs)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ..graph import GraphView, attr
from ..rule import Match, Rule


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


class FoldPadIntoConv(Rule):
    name = "fold_pad_conv"
    summary = "fold a constant zero Pad of the spatial dims into the Conv after it"
    anchors = frozenset({"Conv"})

    def pattern(self, g: GraphView, node) -> Match | None:
        pad = g.producer_op(node.input[0], "Pad")
        if pad is None:
            return None
        return Match([pad, node], {"pad": pad, "conv": node})

    def _amounts(self, g: GraphView, pad) -> np.ndarray | str:
        """The Pad's begin/end amounts over every dim of its input, or why they are not known."""
        if g.opset() < 11:
            return np.asarray(attr(pad, "pads", []), dtype=np.int64)
        amounts = g.constant(pad.input[1]) if len(pad.input) > 1 else None
        if amounts is None:
            return "Pad amounts are not a constant"
        amounts = amounts.astype(np.int64).reshape(-1)
        axes_name = pad.input[3] if len(pad.input) > 3 else ""
        if not axes_name:
            return amounts
        axes, rank = g.constant(axes_name), g.rank(pad.input[0])
        if axes is None or rank is None:
            return "Pad axes are not a constant over an input of known rank"
        full = np.zeros(2 * rank, dtype=np.int64)
        for i, a in enumerate(axes.reshape(-1)):
            a = int(a) + (rank if a < 0 else 0)
            full[a], full[a + rank] = amounts[i], amounts[i + len(axes.reshape(-1))]
        return full

    def check(self, g: GraphView, m: Match) -> str | None:
        pad, conv = m["pad"], m["conv"]
        mode = _text(attr(pad, "mode", "constant"))
        if mode != "constant":
            return f"Pad mode is {mode!r}, not constant"
        if g.opset() < 11:
            value = attr(pad, "value", 0.0)
        else:
            value = g.scalar(pad.input[2]) if len(pad.input) > 2 and pad.input[2] else 0.0
        if value is None:
            return "Pad value is not a constant"
        if value != 0.0:
            return f"Pad value is {value}, not 0"
        amounts = self._amounts(g, pad)
        if isinstance(amounts, str):
            return amounts
        rank = len(amounts) // 2
        if rank < 3 or np.any(amounts < 0):
            return "Pad amounts are negative (a crop) or the input has no spatial dims"
        if np.any(amounts[[0, 1, rank, rank + 1]] != 0):
            return "Pad also pads the batch or channel dim"
        auto_pad = _text(attr(conv, "auto_pad", "NOTSET"))
        if auto_pad != "NOTSET":
            return f"Conv uses auto_pad={auto_pad!r}"
        return g.private_problem(pad.output[0], conv)

    def rewrite(self, g: GraphView, m: Match) -> str:
        pad, conv = m["pad"], m["conv"]
        amounts = self._amounts(g, pad)
        rank = len(amounts) // 2
        spatial = rank - 2
        begin, end = amounts[2:rank], amounts[rank + 2:]
        pads = np.asarray(attr(conv, "pads", [0] * (2 * spatial)), dtype=np.int64)
        pads = pads + np.concatenate([begin, end])
        fused = g.make_node("Conv", [pad.input[0], *conv.input[1:]], list(conv.output), conv)
        fused.attribute.extend(a for a in conv.attribute if a.name != "pads")
        fused.attribute.append(helper.make_attribute("pads", [int(p) for p in pads]))
        g.replace([pad, conv], [fused])
        return f"pads {[int(p) for p in pads]}"
