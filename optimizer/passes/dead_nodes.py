"""Nodes whose outputs nothing reads removed (ONNX ops have no side effects)."""

from __future__ import annotations

import onnx

from ..graph import dead_nodes, node_label
from ..rule import Pass, PassContext


class RemoveDeadNodes(Pass):
    name = "remove_dead_nodes"
    summary = "drop nodes none of whose outputs reach a graph output"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        graph = model.graph
        dead = dead_nodes(graph)
        for i in dead:  # descending: indexes stay valid
            ctx.rewrote(self.name, node_label(graph.node[i]), "removed: no output is used")
            del graph.node[i]
        return model, bool(dead)
