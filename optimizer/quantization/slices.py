"""Where one int8 tensor can hide a loss: a Concat that joins values of very different ranges (a detector's box
coordinates, 0-640 px, and its class scores, 0-1) gets one int8 scale from the larger, and every smaller value
rounds to a level or two. A whole-output metric does not see it: the boxes dominate the cosine.

concat_traps() finds such Concats from the calibration data, so the quantizer keeps them in float; output_slices()
says which parts of each graph output come from which Concat input, so the accuracy report measures each part on
its own (accuracy.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, shape_inference

from ..graph import GraphView

# Inputs of one Concat whose ranges (largest |value| seen in calibration) differ by more than this are not given
# one int8 scale: 256 levels spread over the larger range leave the smaller under a level or two.
RANGE_RATIO_LIMIT = 100.0


@dataclass(frozen=True)
class Slice:
    label: str  # the Concat input the part comes from: "Concat 'cat' input 'scores'"
    start: int
    stop: int


@dataclass(frozen=True)
class OutputSlices:
    axis: int  # of the graph output
    slices: tuple[Slice, ...]


@dataclass(frozen=True)
class ConcatTrap:
    node: str
    reason: str


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    inferred = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def _axis_before(node: onnx.NodeProto, axis: int, shapes: dict) -> int | None:
    """The axis of `node`'s first input that becomes `axis` of its output, where the op keeps that axis whole
    (element-wise, Transpose, a Reshape / Flatten that leaves the dims up to it alone); None otherwise."""
    if node.op_type in ("Identity", "Relu", "Sigmoid", "Clip", "Cast", "Softmax", "LeakyRelu", "HardSigmoid"):
        return axis
    if node.op_type == "Transpose":
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
        return perm[axis] if perm is not None and axis < len(perm) else None
    if node.op_type in ("Reshape", "Flatten"):
        before, after = shapes.get(node.input[0]), shapes.get(node.output[0])
        # The dims up to the axis unchanged (an unknown batch dim may stay unknown), the axis itself static.
        if before and after and len(before) > axis and len(after) > axis and before[axis] is not None \
                and before[:axis + 1] == after[:axis + 1]:
            return axis
    return None


def output_slices(model: onnx.ModelProto) -> dict[str, OutputSlices]:
    """Graph output -> the parts of one of its axes that come from each input of a Concat it is made from (through
    ops that keep that axis whole), where the Concat inputs' sizes along it are known."""
    view, shapes = GraphView(model), _static_shapes(model)
    out = {}
    for output in model.graph.output:
        name, steps = output.name, []
        node = view.producer(name)
        while node is not None and node.op_type != "Concat" and len(steps) < 8:
            steps.append(node)
            node = view.producer(node.input[0]) if node.input else None
        if node is None or node.op_type != "Concat":
            continue
        rank = len(shapes.get(node.output[0]) or [])
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        axis = axis + rank if axis < 0 else axis
        sizes = [(shapes.get(i) or [None] * rank)[axis] if rank else None for i in node.input]
        if not rank or None in sizes:
            continue
        # Map the Concat's axis forward through the steps to the output's axis.
        out_axis = axis
        for step in reversed(steps):
            out_axis = next((a for a in range(len(shapes.get(step.output[0]) or [])) if _axis_before(step, a, shapes) == out_axis),
                            None)
            if out_axis is None:
                break
        if out_axis is None:
            continue
        start, parts = 0, []
        for i, size in zip(node.input, sizes):
            parts.append(Slice(f"Concat '{node.name}' input '{i}'", start, start + size))
            start += size
        out[name] = OutputSlices(out_axis, tuple(parts))
    return out


def concat_traps(model: onnx.ModelProto, batches: list[dict], ratio: float = RANGE_RATIO_LIMIT) -> list[ConcatTrap]:
    """Concats (by node name) whose float inputs' largest magnitudes on `batches` differ by more than `ratio`."""
    from optim.ep_plugin import cpu_session

    concats = [n for n in model.graph.node if n.op_type == "Concat" and n.name and len(n.input) > 1]
    if not concats or not batches:
        return []
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    wanted = [i for n in concats for i in n.input if i and i not in have]
    probe.graph.output.extend(helper.make_empty_tensor_value_info(i) for i in dict.fromkeys(wanted))
    sess = cpu_session(probe.SerializeToString(), optimization="disable")
    names = [o.name for o in sess.get_outputs()]
    peaks: dict[str, float] = {}
    for batch in batches:
        for name, value in zip(names, sess.run(None, batch)):
            if np.issubdtype(np.asarray(value).dtype, np.floating) and np.size(value):
                peaks[name] = max(peaks.get(name, 0.0), float(np.max(np.abs(value))))
    traps = []
    for n in concats:
        ranges = {i: peaks[i] for i in n.input if i in peaks}
        if len(ranges) < 2:
            continue
        big, small = max(ranges, key=ranges.get), min(ranges, key=ranges.get)
        if ranges[big] > ratio * max(ranges[small], 1e-30):
            traps.append(ConcatTrap(n.name, f"Concat '{n.name}' joins inputs whose ranges differ "
                                            f"{ranges[big] / max(ranges[small], 1e-30):.0f}x ('{big}' up to "
                                            f"{ranges[big]:.3g}, '{small}' up to {ranges[small]:.3g}): one int8 scale "
                                            "would flatten the smaller; kept in float"))
    return traps


__all__ = ["RANGE_RATIO_LIMIT", "ConcatTrap", "OutputSlices", "Slice", "concat_traps", "output_slices"]
