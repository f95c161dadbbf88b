"""An exported causal LM's graph with its KV cache kept at a fixed capacity, updated where it lies.

As exported (exporter/causal_lm.py), each cache is [batch, kv_heads, length, head_dim] and a step makes its present
as Concat(past, new, axis 2): a new tensor each step, every past row copied into it (on a 0.1B Llama, 24 caches of
~160 KB per token at 160 positions), and the caller binds 48 new tensors per step. Here each cache is a buffer of
[batch, kv_heads, capacity, head_dim] whose first `past` positions hold the cache; a step writes its new rows into
it (ScatterND at the positions the CACHE_WRITE_INDICES input names) and the attention reads the first `past +
sequence` positions (a Slice, which OptimEP's GroupAttention takes into its step). CausalLM (llm/model.py) binds
each cache's past and present to the same buffer once, until it grows: the buffers' shapes no longer change from
one step to the next, so a step binds only the token ids, the mask, the positions and the write indices.

The rewrite, per cache (past input P read by its Concat and by Shape nodes, present output R made by the Concat):
    R = ScatterND(P [batch, kv, capacity, hd], CACHE_WRITE_INDICES [batch, kv, sequence, 3], new)
    what read R before reads Slice(R, starts 0, ends total, axis 2), total = the attention mask's length
    Shape(P)[2] (the exporters' past length) becomes total - sequence
The file on disk is not changed: the rewritten graph is only for OptimEP sessions made by CausalLM.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from .info import CausalLMInfo

CACHE_WRITE_INDICES = "cache_write_indices"  # int64 [batch, kv_heads, sequence, 3]: (row, head, position) per new row
CAPACITY_DIM = "capacity"
_TOTAL, _SEQUENCE, _PAST = "cache/total", "cache/sequence", "cache/past"  # [1] int64 each
_ZERO, _AXIS = "cache/zero", "cache/axis"


class LayoutError(ValueError):
    """The graph's cache is not updated as exporter/causal_lm.py writes it (a Concat of past and new on the
    sequence axis), so it cannot be kept in place."""


def write_indices(batch: int, kv_heads: int, past: int, sequence: int) -> np.ndarray:
    """CACHE_WRITE_INDICES for a step writing positions past .. past + sequence - 1 of every row and head."""
    idx = np.empty((batch, kv_heads, sequence, 3), np.int64)
    idx[..., 0] = np.arange(batch)[:, None, None]
    idx[..., 1] = np.arange(kv_heads)[None, :, None]
    idx[..., 2] = past + np.arange(sequence)[None, None, :]
    return idx


def fixed_capacity(model: onnx.ModelProto, info: CausalLMInfo) -> None:
    """Rewrites `model` in place so that every cache is a fixed-capacity buffer updated where it lies (the module
    docstring); LayoutError (the model then half rewritten: drop it) when a cache is not updated by a plain Concat
    or its past is read by more than the Concat and Shape nodes of single dims."""
    graph = model.graph
    # Node positions (protobuf hands out a new Python object per access, so nodes are known by index).
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output}
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(graph.node):
        for name in n.input:
            readers.setdefault(name, []).append(i)
    inputs = {v.name: v for v in graph.input}
    outputs = {v.name: v for v in graph.output}
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        raise LayoutError("the graph has no input_ids and attention_mask inputs")
    after: dict[int, list[onnx.NodeProto]] = {}
    for past, present in zip(info.cache_names(), info.output_names()[1:]):
        if past not in inputs or present not in outputs or present not in producer:
            raise LayoutError(f"the graph has no cache input {past!r} and output {present!r}")
        if inputs[past].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise LayoutError(f"{past!r} is not float32 (the buffers CausalLM binds are)")
        at = producer[present]
        concat = graph.node[at]
        axis = next((a.i for a in concat.attribute if a.name == "axis"), None)
        if (concat.op_type != "Concat" or concat.domain not in ("", "ai.onnx") or list(concat.input[:1]) != [past]
                or len(concat.input) != 2 or axis not in (2, -2)):
            raise LayoutError(f"{present!r} is not Concat({past!r}, new, axis 2)")
        for r in readers.get(past, []):
            if r != at:
                _past_length_from(graph.node[r], past)
        valid = f"{present}/valid"
        for r in readers.get(present, []):
            reader = graph.node[r]
            for k, name in enumerate(reader.input):
                if name == present:
                    reader.input[k] = valid
        new = concat.input[1]
        concat.Clear()
        concat.CopyFrom(helper.make_node("ScatterND", [past, CACHE_WRITE_INDICES, new], [present],
                                         name=f"{present}/write"))
        after.setdefault(at, []).append(
            helper.make_node("Slice", [present, _ZERO, _TOTAL, _AXIS], [valid], name=f"{present}/cut"))
        _capacity_dims(inputs[past])
        _capacity_dims(outputs[present])
    first = [
        helper.make_node("Shape", ["attention_mask"], [_TOTAL], name=_TOTAL, start=1, end=2),
        helper.make_node("Shape", ["input_ids"], [_SEQUENCE], name=_SEQUENCE, start=1, end=2),
        helper.make_node("Sub", [_TOTAL, _SEQUENCE], [_PAST], name=_PAST),
        helper.make_node("Constant", [], [_ZERO], name=_ZERO,
                         value=helper.make_tensor(_ZERO, onnx.TensorProto.INT64, [1], [0])),
        helper.make_node("Constant", [], [_AXIS], name=_AXIS,
                         value=helper.make_tensor(_AXIS, onnx.TensorProto.INT64, [1], [2])),
    ]
    nodes = list(first)
    for i, n in enumerate(graph.node):
        nodes += [n, *after.get(i, [])]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input.append(helper.make_tensor_value_info(CACHE_WRITE_INDICES, onnx.TensorProto.INT64,
                                                     ["batch", info.kv_heads, "sequence", 3]))


def _past_length_from(shape: onnx.NodeProto, past: str) -> None:
    """A Shape node reading a past: its dim 2 (the past length) becomes total - sequence, as the buffer's dim 2 is
    its capacity; the other dims are the buffer's own."""
    if shape.op_type != "Shape" or shape.domain not in ("", "ai.onnx"):
        raise LayoutError(f"{past!r} is read by {shape.op_type} {shape.name!r}, not only by its Concat and Shape nodes")
    attrs = {a.name: a.i for a in shape.attribute}
    begin, end = attrs.get("start", 0), attrs.get("end", 4)
    begin, end = (b + 4 if b < 0 else b for b in (begin, end))
    dims = list(range(max(begin, 0), min(end, 4)))
    if dims == [2]:
        out = shape.output[0]
        shape.Clear()
        shape.CopyFrom(helper.make_node("Identity", [_PAST], [out], name=f"{out}/past_length"))
    elif 2 in dims:
        raise LayoutError(f"Shape {shape.name!r} reads dims {dims} of {past!r} together (only the past length alone)")


def _capacity_dims(value: onnx.ValueInfoProto) -> None:
    dims = value.type.tensor_type.shape.dim
    if len(dims) != 4:
        raise LayoutError(f"{value.name!r} is not 4-D [batch, kv_heads, length, head_dim]")
    dims[2].Clear()
    dims[2].dim_param = CAPACITY_DIM
