"""Resize sizes assembled at run time from the input's own dims -> constant scales.

Decoders write `interpolate(t, size=(H, W))` as Resize(t, sizes=Concat(Shape(t)[0:2], [H, W])): the
batch and channel dims are copied, only H and W are fixed. When shape inference knows the input's H and
W, the same output comes from the constant scales [1, 1, H/h, W/w]: ONNX Runtime turns sizes into exactly
these float32 ratios before it interpolates, and floor(h * H/h) gives H back (checked for each dim). The
Shape/Slice/Concat nodes become dead, so no shape computation splits the graph around the Resize.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import GraphView, attr
from ..rule import Match, Rule
from .reshape_shapes import _CONST, input_dims_and_pieces


class ConstantResizeScales(Rule):
    name = "constant_resize_scales"
    summary = "Resize sizes built from the input's own dims (Shape/Slice/Concat) -> constant scales"
    anchors = frozenset({"Resize"})

    def pattern(self, g: GraphView, node) -> Match | None:
        if len(node.input) < 4 or not node.input[3] or (node.input[2] and g.constant(node.input[2]) is None):
            return None
        concat = g.producer_op(node.input[3], "Concat")
        return None if concat is None else Match([node], {"resize": node, "concat": concat})

    def check(self, g: GraphView, m: Match) -> str | None:
        resize, concat = m["resize"], m["concat"]
        if g.opset() < 13:
            return "Resize before opset 13 takes scales and sizes differently"
        if node_scales_given(g, resize):
            return "both scales and sizes are given"
        if attr(resize, "axes") is not None or attr(resize, "keep_aspect_ratio_policy", b"stretch") not in (b"stretch", "stretch"):
            return "sizes apply to some axes only or keep the aspect ratio"
        if attr(resize, "coordinate_transformation_mode", b"half_pixel") in (b"tf_crop_and_resize", "tf_crop_and_resize"):
            return "tf_crop_and_resize reads a region of interest"
        found = input_dims_and_pieces(g, resize, concat, "size")
        if isinstance(found, str):
            return found
        data, pieces = found
        if len(pieces) != len(data):
            return f"{len(pieces)} sizes for an input of rank {len(data)}"
        scales = []
        for position, ((kind, value), size) in enumerate(zip(pieces, data)):
            if value is not None and value == size and (kind != _CONST or isinstance(size, int)):
                scales.append(np.float32(1.0))  # this dim is copied
                continue
            if kind != _CONST and not isinstance(value, int) or not isinstance(size, int) or size <= 0:
                return f"size {position} ({value or 'unknown'}) against the input's dim {position} ({size or 'unknown'})"
            scale = np.float32(value) / np.float32(size)
            if int(np.float32(size) * scale) != value or math.floor(size * float(scale)) != value:
                return f"size {position} ({value}) is not floor({size} x {float(scale)!r}) in float32"
            scales.append(scale)
        m.values["scales"] = np.array(scales, dtype=np.float32)
        return None

    def rewrite(self, g: GraphView, m: Match) -> str:
        resize, scales = m["resize"], m["scales"]
        name = g.add_initializer(scales, f"{resize.output[0]}_scales")
        del resize.input[2:]
        resize.input.append(name)
        g.reindex()
        return f"run-time sizes -> constant scales {[float(s) for s in scales]}"


def node_scales_given(g: GraphView, resize) -> bool:
    """Whether the Resize has a non-empty scales input next to its sizes."""
    value = g.constant(resize.input[2]) if resize.input[2] else None
    return value is not None and value.size > 0
