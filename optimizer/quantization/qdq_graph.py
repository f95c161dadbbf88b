"""Reading and editing QDQ models for the sensitivity search: which nodes were quantized, and a copy of
the QDQ model with some nodes in float — fed the float tensors it read before quantization, its outputs no
longer quantized for readers that are not quantized themselves — which is what onnxruntime's quantizer
gives with those nodes excluded, without running the quantizer again. Built on the optimizer's GraphView,
so reads from If/Loop/Scan bodies count like any other."""

from __future__ import annotations

import onnx

from ..graph import GraphView, dead_nodes, read_names

_QDQ = {"QuantizeLinear", "DequantizeLinear"}


def _made_by(view: GraphView, name: str, op_type: str) -> onnx.NodeProto | None:
    """The node of `op_type` (any domain) producing `name`, else None."""
    node = view.producer(name)
    return node if node is not None and node.op_type == op_type else None


def quantized_nodes(qdq: onnx.ModelProto, op_types: set[str]) -> list[tuple[str, str]]:
    """(name, op type) of each node of `op_types`, in graph order, that reads a DequantizeLinear output."""
    view = GraphView(qdq)
    return [(n.name, n.op_type) for n in view.nodes
            if n.op_type in op_types and n.name and any(_made_by(view, i, "DequantizeLinear") for i in n.input)]


def with_nodes_in_float(qdq: onnx.ModelProto, float_model: onnx.ModelProto, names: set[str],
                        quantized: set[str]) -> onnx.ModelProto | None:
    """A copy of `qdq` with the nodes `names` in float; `quantized`: names of the nodes that stay quantized
    (they keep reading dequantized tensors). None when the quantizer reshaped one of the nodes (renamed
    outputs, e.g. a Relu folded into it), so that only quantizing again can say what excluding it gives."""
    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    view = GraphView(model)
    originals = {n.name: n for n in float_model.graph.node if n.name in names}
    nodes = {n.name: n for n in view.nodes if n.name in names}
    float_weights = {t.name: t for t in float_model.graph.initializer}
    for name in names:
        node, original = nodes.get(name), originals.get(name)
        if (original is None or node is None or list(original.output) != list(node.output)
                or len(original.input) != len(node.input)):
            return None
        for k, tensor in enumerate(node.input):
            dq = _made_by(view, tensor, "DequantizeLinear")
            if dq is None:
                continue
            q = _made_by(view, dq.input[0], "QuantizeLinear")
            if q is not None:
                node.input[k] = q.input[0]  # the float activation
                continue
            weight = float_weights.get(original.input[k])
            if weight is None:
                return None
            copy = onnx.TensorProto()
            copy.CopyFrom(weight)
            copy.name = view.fresh_name(f"{weight.name}_float")  # the DQ output may carry the original name
            model.graph.initializer.append(copy)
            node.input[k] = copy.name
    view.reindex()  # inputs changed under the view
    # A tensor stays quantized, for all its readers, only while a quantized node produces or reads it.
    # Nodes are in topological order, so a Q reading an earlier DQ's output finds it in `renames`.
    renames: dict[str, str] = {}
    for dq in [n for n in view.nodes if n.op_type == "DequantizeLinear"]:
        q = _made_by(view, dq.input[0], "QuantizeLinear")
        if q is None:
            continue
        value = renames.get(q.input[0], q.input[0])
        source = view.producer(value)
        if (source is not None and source.name in quantized) or any(r.name in quantized for r in view.consumers(dq.output[0])):
            continue
        if dq.output[0] in view.outputs:
            return None
        renames[dq.output[0]] = value
    view.redirect(renames)
    _drop_unread(model.graph)
    return model


def _drop_unread(graph: onnx.GraphProto) -> None:
    """Removes the Q/DQ nodes nothing needs any more (a DQ's Q goes with it) and the initializers nothing reads."""
    for k in dead_nodes(graph, lambda n: n.op_type in _QDQ):
        del graph.node[k]
    read = read_names(graph) | {i.name for i in graph.input}
    keep = [t for t in graph.initializer if t.name in read]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)
