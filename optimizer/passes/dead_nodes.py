"""Nodes whose outputs nothing reads removed (ONNX ops have no side effects)."""

from __future__ import annotations

import onnx

from ..graph import node_label, outer_names, subgraphs
from ..rule import Pass, PassContext


class RemoveDeadNodes(Pass):
    name = "remove_dead_nodes"
    summary = "drop nodes none of whose outputs reach a graph output"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        graph = model.graph
        needed = {v.name for v in graph.output}
        dead = []
        # Walking backwards, a node is live when a live node (or a graph output) reads one of its
        # outputs; one sweep suffices because the node list is topologically sorted.
        for i in range(len(graph.node) - 1, -1, -1):
            node = graph.node[i]
            if any(out in needed for out in node.output if out):
                needed.update(x for x in node.input if x)
                for sub in subgraphs(node):
                    needed |= outer_names(sub)
            else:
                dead.append(i)
        for i in dead:  # descending: indexes stay valid
            ctx.rewrote(self.name, node_label(graph.node[i]), "removed: no output is used")
            del graph.node[i]
        return model, bool(dead)
