"""Constant folding of what simplification left (or all of it, with --no-simplify): Constant nodes
become initializers, Shape/Size of tensors with static shapes become constants, and nodes whose
inputs are all constants are evaluated once on ONNX Runtime's CPU EP (the runtime the proof uses)
and replaced by their results.
"""

from __future__ import annotations

import math
from typing import Union

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from ..graph import GraphView, attr, constant_node_value, subgraphs
from ..rule import Pass, PassContext

# Results larger than this that are also larger than the node's inputs stay computed at run time:
# folding an Expand or Tile of a small constant would bloat the model file.
MAX_FOLDED_BYTES = 1 << 20
# Random ops must draw anew on every run; DequantizeLinear of constant weights is kept so the
# QDQ units int8 kernels look for survive.
_NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
               "DequantizeLinear", "Constant"}


class FoldConstants(Pass):
    name = "fold_constants"
    summary = "Constant nodes -> initializers; Shape/Size of static shapes and nodes of constants -> computed constants"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        g = ctx.view(model)
        folded = 0
        for node in list(g.nodes):
            if not g.is_default_domain(node):
                continue
            if node.op_type == "Constant":
                outcome = _constant_to_initializer(g, node)
            elif node.op_type in ("Shape", "Size") and g.constant(node.input[0]) is None:
                outcome = _static_shape(g, node)
            elif node.op_type == "Slice" and g.producer_op(node.input[0], "Shape") is not None:
                outcome = _static_shape_slice(g, node)
            else:
                outcome = _evaluate(g, node)
            if outcome is None:
                continue
            if isinstance(outcome, str):
                ctx.refused(self.name, node, outcome)
                continue
            tensors, message = outcome
            ctx.rewrote(self.name, node, message)
            for name, tensor in tensors.items():
                tensor.name = name
                g.graph.initializer.append(tensor)
            g.replace([node])
            folded += 1
        return model, folded > 0


# (new initializers by name, message) when folded, a reason when refused, None when not a candidate.
Outcome = Union[tuple[dict[str, onnx.TensorProto], str], str, None]


def _output_problem(g: GraphView, node) -> str | None:
    outs = [o for o in node.output if o in g.outputs]
    return f"its output {outs[0]!r} is a graph output, which should stay computed by a node" if outs else None


def _constant_to_initializer(g: GraphView, node) -> Outcome:
    problem = _output_problem(g, node)
    if problem:
        return problem
    tensor = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
    if tensor is not None:
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
    else:
        value = constant_node_value(node)
        if value is None:
            return "it holds a sparse tensor or strings"
        copy = numpy_helper.from_array(value)
    return {node.output[0]: copy}, "Constant -> initializer"


def _static_shape(g: GraphView, node) -> Outcome:
    dims = g.shape(node.input[0])
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None  # dynamic: stays a run-time Shape
    problem = _output_problem(g, node)
    if problem:
        return problem
    if node.op_type == "Size":
        value = np.array(math.prod(dims), dtype=np.int64)
    else:
        value = np.array(shape_dims(g, node), dtype=np.int64)
    return {node.output[0]: numpy_helper.from_array(value)}, f"{node.op_type} of a static shape -> {value.tolist()}"


def shape_dims(g: GraphView, shape_node) -> list | None:
    """The dims (ints, dim names, None) a Shape node outputs, its start/end applied."""
    dims = g.shape(shape_node.input[0])
    return None if dims is None else dims[attr(shape_node, "start", 0):attr(shape_node, "end", None)]


def sliced_shape_dims(g: GraphView, node) -> list | None:
    """The dims that a Slice of a Shape output selects, when its starts/ends/axes/steps are constants."""
    dims = shape_dims(g, g.producer_op(node.input[0], "Shape"))
    names = list(node.input[1:5]) + [""] * (5 - len(node.input))  # starts, ends, axes, steps
    values = [g.constant(n) if n else None for n in names]
    if dims is None or values[0] is None or values[1] is None or any(v is None for v, n in zip(values, names) if n):
        return None
    starts, ends, axes, steps = (None if v is None else [int(a) for a in v.reshape(-1)] for v in values)
    step = steps[0] if steps else 1
    if axes not in (None, [0], [-1]) or len(starts) != 1 or step == 0:
        return None
    # Python's slice clamping is ONNX Slice's on one axis.
    return [dims[i] for i in range(*slice(starts[0], ends[0], step).indices(len(dims)))]


def _static_shape_slice(g: GraphView, node) -> Outcome:
    dims = sliced_shape_dims(g, node)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None
    problem = _output_problem(g, node)
    if problem:
        return problem
    value = np.array(dims, dtype=np.int64)
    return {node.output[0]: numpy_helper.from_array(value)}, f"Slice of static dims of a shape -> {value.tolist()}"


def _evaluate(g: GraphView, node) -> Outcome:
    inputs = [i for i in node.input if i]
    if node.op_type in _NEVER_FOLD or not inputs or any(True for _ in subgraphs(node)):
        return None
    values = [g.constant(i) for i in inputs]
    if any(v is None for v in values):
        return None
    problem = _output_problem(g, node)
    if problem:
        return problem
    try:
        results = _run_node(g.model, node, dict(zip(inputs, values)))
    except Exception as e:  # noqa: BLE001 - ORT's reason is the refusal reason
        return f"ONNX Runtime could not evaluate it: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
    in_bytes = sum(v.nbytes for v in values)
    tensors = {}
    for name, value in results.items():
        if not isinstance(value, np.ndarray):
            return f"output {name!r} is not a tensor"
        if value.nbytes > MAX_FOLDED_BYTES and value.nbytes > in_bytes:
            return f"its {value.nbytes / 1e6:.1f} MB result is larger than its inputs; computing it at run time keeps the file small"
        tensors[name] = numpy_helper.from_array(value)
    shapes = ", ".join(str(list(v.shape)) for v in results.values())
    return tensors, f"evaluated once -> constant {shapes}"


def _run_node(model: onnx.ModelProto, node, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Runs one node on ORT's CPU EP with its (constant) inputs as initializers."""
    outputs = [o for o in node.output if o]
    graph = helper.make_graph([node], "fold", [], [helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in feeds.items()])
    mini = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    session = ort.InferenceSession(mini.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip(outputs, session.run(None, {})))
