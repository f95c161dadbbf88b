"""Reading and editing QDQ models for the sensitivity search: which nodes were quantized, and a copy of
the QDQ model with some nodes in float — fed the float tensors it read before quantization, its outputs no
longer quantized for readers that are not quantized themselves — which is what onnxruntime's quantizer
gives with those nodes excluded, without running the quantizer again."""

from __future__ import annotations

import onnx

_QDQ = {"QuantizeLinear", "DequantizeLinear"}


def quantized_nodes(qdq: onnx.ModelProto, op_types: set[str]) -> list[tuple[str, str]]:
    """(name, op type) of each node of `op_types`, in graph order, that reads a DequantizeLinear output."""
    dequantized = {o for n in qdq.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return [(n.name, n.op_type) for n in qdq.graph.node
            if n.op_type in op_types and n.name and any(i in dequantized for i in n.input)]


def with_nodes_in_float(qdq: onnx.ModelProto, float_model: onnx.ModelProto, names: set[str],
                        quantized: set[str]) -> onnx.ModelProto | None:
    """A copy of `qdq` with the nodes `names` in float; `quantized`: names of the nodes that stay quantized
    (they keep reading dequantized tensors). None when the quantizer reshaped one of the nodes (renamed
    outputs, e.g. a Relu folded into it), so that only quantizing again can say what excluding it gives."""
    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    graph = model.graph
    originals = {n.name: n for n in float_model.graph.node if n.name in names}
    nodes = {n.name: n for n in graph.node if n.name in names}
    float_weights = {t.name: t for t in float_model.graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    taken = set(producer) | {t.name for t in graph.initializer} | {i.name for i in graph.input}
    for name in names:
        node, original = nodes.get(name), originals.get(name)
        if (original is None or node is None or list(original.output) != list(node.output)
                or len(original.input) != len(node.input)):
            return None
        for k, tensor in enumerate(node.input):
            dq = producer.get(tensor)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            q = producer.get(dq.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                node.input[k] = q.input[0]  # the float activation
                continue
            weight = float_weights.get(original.input[k])
            if weight is None:
                return None
            copy = onnx.TensorProto()
            copy.CopyFrom(weight)
            copy.name = _fresh(f"{weight.name}_float", taken)  # the DQ output may carry the original name
            graph.initializer.append(copy)
            node.input[k] = copy.name
    # A tensor stays quantized, for all its readers, only while a quantized node produces or reads it.
    readers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    graph_outputs = {o.name for o in graph.output}
    for dq in [n for n in graph.node if n.op_type == "DequantizeLinear"]:
        q = producer.get(dq.input[0])
        if q is None or q.op_type != "QuantizeLinear":
            continue
        source = producer.get(q.input[0])
        if (source is not None and source.name in quantized) or any(r.name in quantized for r in readers.get(dq.output[0], [])):
            continue
        if dq.output[0] in graph_outputs:
            return None
        for reader in readers.get(dq.output[0], []):
            for j, tensor in enumerate(reader.input):
                if tensor == dq.output[0]:
                    reader.input[j] = q.input[0]
    _drop_unread(model)
    return model


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _drop_unread(model: onnx.ModelProto) -> None:
    """Removes Q/DQ nodes and initializers nothing reads any more (repeatedly: a DQ's Q goes next)."""
    graph = model.graph
    while True:
        read = {o.name for o in graph.output} | {i for n in graph.node for i in n.input}
        dead = [k for k, n in enumerate(graph.node) if n.op_type in _QDQ and not any(o in read for o in n.output)]
        if not dead:
            break
        for k in reversed(dead):
            del graph.node[k]
    read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output} | {i.name for i in graph.input}
    keep = [t for t in graph.initializer if t.name in read]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)
