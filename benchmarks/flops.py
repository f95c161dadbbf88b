"""Multiply-adds of an ONNX model, from its Conv/ConvTranspose/MatMul/Gemm nodes and ONNX shape inference.

How it counts (one multiply-add = 2 operations when turned into GFLOP/s):
- Conv: every output element costs (input channels / group) x kernel height x kernel width, that is
  prod(output shape) x prod(weight shape[1:]);
- ConvTranspose: every input element is spread over (output channels / group) x kernel, that is
  prod(input shape) x prod(weight shape[1:]);
- MatMul and Gemm: every output element costs the contracted size K (broadcast batch dims included).
Everything else (bias adds, activations, normalization, softmax, pooling, resizing) is left out: it
is a small share of the arithmetic and none of it is a multiply-add. The graph's free dims are fixed
to the inputs' shapes before shape inference. Where inference cannot follow the shapes (a mask built
from Shape/Range values broadcast against a batch of 1, say), the values it left unknown are made
outputs of a copy of the model and measured in one run on ONNX Runtime's CPU EP with the inputs
given. A node whose shapes are still unknown then is listed as uncounted rather than guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import shape_inference

from optim.ep_plugin import cpu_session

COUNTED_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


@dataclass
class MacCount:
    total: int = 0
    by_op: dict[str, int] = field(default_factory=dict)
    by_node: dict[str, int] = field(default_factory=dict)  # node name ("Conv#3" for an unnamed node) -> multiply-adds
    uncounted: list[str] = field(default_factory=list)  # "op 'node'" whose shapes inference left unknown

    @property
    def gflop(self) -> float:
        return 2 * self.total / 1e9


def _fix_inputs(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> None:
    for value in model.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for d, size in zip(dims, shapes[value.name]):
                d.Clear()
                d.dim_value = int(size)


def _known_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    out = {t.name: list(t.dims) for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        t = value.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[value.name] = [d.dim_value for d in t.shape.dim]
    return out


def _node_macs(node: onnx.NodeProto, shapes: dict[str, list[int]]) -> int | None:
    x, w = (shapes.get(node.input[i]) if len(node.input) > i else None for i in (0, 1))
    y = shapes.get(node.output[0])
    if node.op_type == "Conv" and y is not None and w is not None:
        return math.prod(y) * math.prod(w[1:])
    if node.op_type == "ConvTranspose" and x is not None and w is not None:
        return math.prod(x) * math.prod(w[1:])
    if node.op_type == "MatMul" and y is not None and x is not None:
        return math.prod(y) * x[-1]
    if node.op_type == "Gemm" and y is not None and x is not None:
        trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
        return math.prod(y) * (x[0] if trans_a else x[-1])
    return None


def _measured_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray], names: list[str]) -> dict[str, list[int]]:
    """Shapes of the values `names` in one CPU EP run of `model` on `feeds` (graph optimizations off,
    so every value of the file exists as it is named)."""
    work = onnx.ModelProto()
    work.CopyFrom(model)
    outputs = {o.name for o in work.graph.output}
    work.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in outputs)
    sess = cpu_session(work.SerializeToString(), optimization="disable")
    return {n: list(v.shape) for n, v in zip(names, sess.run(names, feeds))}


def count_macs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> MacCount:
    """Multiply-adds of one run of `model` on the inputs `feeds` (the model is not modified)."""
    work = onnx.ModelProto()
    work.CopyFrom(model)
    _fix_inputs(work, {k: v.shape for k, v in feeds.items()})
    del work.graph.value_info[:]  # the exporter's notes may name the batch dim: infer from the inputs alone
    inferred = shape_inference.infer_shapes(work, data_prop=True)
    shapes = _known_shapes(inferred)
    counted = [n for n in inferred.graph.node if n.op_type in COUNTED_OPS]
    unknown = sorted({v for n in counted for v in [*n.input[:2], n.output[0]] if v and v not in shapes})
    if unknown:
        shapes.update(_measured_shapes(model, feeds, unknown))
    count = MacCount()
    for i, node in enumerate(counted):
        macs = _node_macs(node, shapes)
        if macs is None:
            count.uncounted.append(f"{node.op_type} '{node.name}'")
            continue
        count.total += macs
        count.by_op[node.op_type] = count.by_op.get(node.op_type, 0) + macs
        name = node.name or f"{node.op_type}#{i}"
        count.by_node[name] = count.by_node.get(name, 0) + macs
    return count
