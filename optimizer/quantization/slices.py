"""Where one int8 tensor can hide a loss: a Concat that joins values of very different ranges (a detector's box
coordinates, 0-640 px, and its class scores, 0-1) gets one int8 scale from the larger, and every smaller value
rounds to a level or two. A whole-output metric does not see it: the boxes dominate the cosine.

concat_traps() finds such Concats from the calibration data, so the quantizer keeps them in float; output_slices()
says which parts of each graph output come from which Concat input, so the accuracy report measures each part on
its own (accuracy.py). An output made by one op (a detection head's convolution: box and class channels under one
scale) has no Concat to read: small_channel_groups() finds its channels of much smaller range from the float
outputs, which the report then measures apart as well.
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


# Channel groups are looked for along axes of at most this many channels (a class or feature axis, not a
# detector's thousands of anchors); a group is a run of at least GROUP_MIN_RUN adjacent small channels (a layout's
# block, such as a head's class scores: one small class logit of a random classifier is chance, four in a row are
# not), and at most GROUP_RUN_LIMIT runs are measured.
GROUP_AXIS_LIMIT = 1024
GROUP_MIN_RUN = 4
GROUP_RUN_LIMIT = 8


def small_channel_groups(outputs: list[np.ndarray], ratio: float = RANGE_RATIO_LIMIT) -> OutputSlices | None:
    """For one graph output not made by a Concat (a detection head's single convolution, 4 box channels beside 80
    class channels): the runs of GROUP_MIN_RUN or more adjacent channels whose float range on `outputs` (one array
    per batch) is under 1/`ratio` of the output's, along the axis (1 to the last, at most GROUP_AXIS_LIMIT long)
    where such runs spread most. Those channels share the output's one int8 scale and are where a loss can hide;
    None when there are none."""
    arrays = [np.asarray(a) for a in outputs]
    if not arrays or arrays[0].ndim < 2 or not np.issubdtype(arrays[0].dtype, np.floating):
        return None
    best = None
    for axis in range(1, arrays[0].ndim):
        if arrays[0].shape[axis] > GROUP_AXIS_LIMIT or any(a.shape[axis] != arrays[0].shape[axis] for a in arrays):
            continue
        others = tuple(a for a in range(arrays[0].ndim) if a != axis)
        peaks = np.max([np.max(np.abs(a), axis=others) for a in arrays], axis=0)
        top = float(peaks.max()) if peaks.size else 0.0
        runs = _runs((peaks > 0) & (peaks * ratio < top))
        if runs:
            spread = top / min(float(peaks[a:b].max()) for a, b in runs)
            if best is None or spread > best[0]:
                best = (spread, axis, runs, top)
    if best is None:
        return None
    _, axis, runs, top = best
    return OutputSlices(axis, tuple(Slice(f"channels {a}-{b - 1} of axis {axis} (range under 1/{ratio:.0f} of the "
                                          f"output's {top:.3g})", a, b) for a, b in runs[:GROUP_RUN_LIMIT]))


def _runs(small: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of at least GROUP_MIN_RUN True values."""
    runs, start = [], None
    for c, is_small in enumerate([*small.tolist(), False]):
        if is_small and start is None:
            start = c
        elif not is_small and start is not None:
            if c - start >= GROUP_MIN_RUN:
                runs.append((start, c))
            start = None
    return runs


__all__ = ["RANGE_RATIO_LIMIT", "ConcatTrap", "OutputSlices", "Slice", "concat_traps", "output_slices",
           "small_channel_groups"]
