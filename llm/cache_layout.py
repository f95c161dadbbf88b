"""An exported causal LM's graph with its KV cache kept sequence-first, so that past and present can share one buffer.

As exported (exporter/causal_lm.py), each cache is [batch, kv_heads, length, head_dim] and a step makes its present
as Concat(past, new, axis 2): a new tensor each step, every past row copied into it (on a 0.1B Llama, 24 caches of
~160 KB per token at 160 positions: ~10% of a decode step). Sequence-first, [length, batch, kv_heads, head_dim], a
step's new rows follow the past ones in memory, so CausalLM (llm/model.py) binds past to the first `past` rows of a
buffer and present to the first `past + sequence` rows of the same one, and OptimEP's Concat writes only the new
rows. What reads the present (the attention) sees it through a Transpose back to the exported layout, which
OptimEP's GroupAttention rewrite takes away (it reads the sequence-first cache where it lies).

The rewrite, per cache (past input P read by the Concat alone, present output R made by it):
    P [past, batch, kv, hd] --------------------------------------.
    new [batch, kv, seq, hd] -> Transpose(2, 0, 1, 3) -------------+-> Concat(axis 0) -> R [total, batch, kv, hd]
    R -> Transpose(1, 2, 0, 3) -> [batch, kv, total, hd] -> what read R before    (R stays the graph output)
The file on disk is not changed: the rewritten graph is only for OptimEP sessions made by CausalLM.
"""

from __future__ import annotations

import onnx
from onnx import helper

from .info import CausalLMInfo

NEW_ROWS_PERM = [2, 0, 1, 3]  # [batch, kv, seq, hd] -> [seq, batch, kv, hd]
BATCH_FIRST_PERM = [1, 2, 0, 3]  # [total, batch, kv, hd] -> [batch, kv, total, hd]


class LayoutError(ValueError):
    """The graph's cache is not updated as exporter/causal_lm.py writes it (a Concat of past and new on the
    sequence axis), so it cannot be kept sequence-first."""


def sequence_first(model: onnx.ModelProto, info: CausalLMInfo) -> None:
    """Rewrites `model` in place so that every cache input and output is sequence-first; LayoutError (the model
    then half rewritten: drop it) when a cache is not updated by a plain Concat. Shape nodes reading a past (the
    exporters take the past length from one) are pointed at the same dims in the new layout."""
    graph = model.graph
    # Node positions (protobuf hands out a new Python object per access, so nodes are known by index).
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output}
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(graph.node):
        for name in n.input:
            readers.setdefault(name, []).append(i)
    inputs = {v.name: v for v in graph.input}
    outputs = {v.name: v for v in graph.output}
    before: dict[int, list[onnx.NodeProto]] = {}
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
            reader = graph.node[r]
            if r == at:
                continue
            if reader.op_type != "Shape" or reader.domain not in ("", "ai.onnx"):
                raise LayoutError(f"{past!r} is read by {reader.op_type} {reader.name!r}, not only by its Concat "
                                  f"and Shape nodes")
            after.setdefault(r, []).extend(_shape_sequence_first(reader))
        new_rows = f"{present}/new_rows"
        batch_first = f"{present}/batch_first"
        before.setdefault(at, []).append(
            helper.make_node("Transpose", [concat.input[1]], [new_rows], name=f"{present}/to_sequence_first",
                             perm=NEW_ROWS_PERM))
        after.setdefault(at, []).append(
            helper.make_node("Transpose", [present], [batch_first], name=f"{present}/to_batch_first",
                             perm=BATCH_FIRST_PERM))
        for r in readers.get(present, []):
            reader = graph.node[r]
            for k, name in enumerate(reader.input):
                if name == present:
                    reader.input[k] = batch_first
        concat.input[1] = new_rows
        for a in concat.attribute:
            if a.name == "axis":
                a.i = 0
        _sequence_first_dims(inputs[past])
        _sequence_first_dims(outputs[present])
    nodes = []
    for i, n in enumerate(graph.node):
        nodes += [*before.get(i, []), n, *after.get(i, [])]
    del graph.node[:]
    graph.node.extend(nodes)


# Where each dim of the exported layout [batch, kv, length, hd] lies in the sequence-first one.
SEQUENCE_FIRST_AXIS = (1, 2, 0, 3)


def _shape_sequence_first(shape: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Points Shape node `shape` (of a past) at the same dims of the sequence-first past: one dim by its start / end
    attributes; several by a Gather of the whole shape (returned, to follow the node)."""
    attrs = {a.name: a.i for a in shape.attribute}
    begin, end = attrs.get("start", 0), attrs.get("end", 4)
    begin, end = (b + 4 if b < 0 else b for b in (begin, end))
    wanted = [SEQUENCE_FIRST_AXIS[d] for d in range(max(begin, 0), min(end, 4))]
    del shape.attribute[:]
    if len(wanted) == 1:
        shape.attribute.extend([helper.make_attribute("start", wanted[0]), helper.make_attribute("end", wanted[0] + 1)])
        return []
    result = shape.output[0]
    whole, picks = f"{result}/sequence_first", f"{result}/sequence_first_dims"
    shape.output[0] = whole
    indices = helper.make_tensor(picks, onnx.TensorProto.INT64, [len(wanted)], wanted)
    return [helper.make_node("Constant", [], [picks], name=picks, value=indices),
            helper.make_node("Gather", [whole, picks], [result], name=f"{result}/pick_dims", axis=0)]


def _sequence_first_dims(value: onnx.ValueInfoProto) -> None:
    dims = value.type.tensor_type.shape.dim
    if len(dims) != 4:
        raise LayoutError(f"{value.name!r} is not 4-D [batch, kv_heads, length, head_dim]")
    copies = [onnx.TensorShapeProto.Dimension() for _ in range(4)]
    for c, d in zip(copies, dims):
        c.CopyFrom(d)
    for slot, source in zip(dims, (copies[2], copies[0], copies[1], copies[3])):
        slot.CopyFrom(source)
