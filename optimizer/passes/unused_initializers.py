"""Initializers that no node reads removed, unless the signature lists them."""

from __future__ import annotations

import onnx

from ..graph import read_names
from ..rule import Pass, PassContext


class RemoveUnusedInitializers(Pass):
    name = "remove_unused_initializers"
    summary = "drop initializers nothing reads (those also listed as graph inputs stay)"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        graph = model.graph
        used = read_names(graph)  # subgraph nodes may read outer initializers
        inputs = {v.name for v in graph.input}
        removed = 0
        for i in range(len(graph.initializer) - 1, -1, -1):
            name = graph.initializer[i].name
            if name in used:
                continue
            if name in inputs:
                ctx.refused(self.name, name, "it is also a graph input: removing it would change the model's inputs")
                continue
            ctx.rewrote(self.name, name, "removed: nothing reads it")
            del graph.initializer[i]
            removed += 1
        return model, removed > 0
