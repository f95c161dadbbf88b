"""Identical weights stored once. Folding can give each reader its own copy of a tensor the exporter had shared
(the TorchScript exporter reads a weight used twice through an Identity; folding the Identity copies the weight),
which doubled a 61 MB file to 111 MB."""

from __future__ import annotations

import hashlib

import onnx
from onnx import numpy_helper

from ..graph import subgraphs
from ..rule import Pass, PassContext

# Smaller tensors stay apart: they cost nothing, and a bias shared by two convolutions with different input
# scales would need two quantized copies again (onnxruntime's quantizer names a quantized bias after its input).
SHARE_MIN_BYTES = 64 * 1024


def _key(tensor: onnx.TensorProto) -> tuple | None:
    """(dtype, dims, digest of the values); None for tensors kept in an external file that is not loaded."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    data = numpy_helper.to_array(tensor)
    if data.nbytes < SHARE_MIN_BYTES:
        return None
    return tensor.data_type, tuple(tensor.dims), hashlib.sha256(data.tobytes()).hexdigest()


def _defined(graph: onnx.GraphProto) -> set[str]:
    return ({t.name for t in graph.initializer} | {v.name for v in graph.input}
            | {o for n in graph.node for o in n.output})


def _rename_reads(graph: onnx.GraphProto, renamed: dict[str, str]) -> None:
    """Every read of a name in `renamed`, here and in subgraphs that do not define the name themselves."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
        for sub in subgraphs(node):
            inner = {k: v for k, v in renamed.items() if k not in _defined(sub)}
            if inner:
                _rename_reads(sub, inner)


class ShareIdenticalInitializers(Pass):
    name = "share_initializers"
    summary = "store identical weights (same dtype, shape and values, 64 KiB or more) once"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        graph = model.graph
        pinned = {v.name for v in graph.input} | {v.name for v in graph.output}  # the signature names them
        first: dict[tuple, str] = {}
        renamed: dict[str, str] = {}
        for tensor in graph.initializer:
            key = _key(tensor)
            if key is None:
                continue
            if key not in first:
                first[key] = tensor.name
            elif tensor.name in pinned:
                ctx.refused(self.name, tensor.name, f"same values as {first[key]!r}, but the graph's signature names it")
            else:
                renamed[tensor.name] = first[key]
        if not renamed:
            return model, False
        _rename_reads(graph, renamed)
        for i in range(len(graph.initializer) - 1, -1, -1):
            name = graph.initializer[i].name
            if name in renamed:
                ctx.rewrote(self.name, name, f"removed: its readers read {renamed[name]!r}, which holds the same values")
                del graph.initializer[i]
        for i in range(len(graph.value_info) - 1, -1, -1):
            if graph.value_info[i].name in renamed:
                del graph.value_info[i]
        ctx.invalidate()
        return model, True
