"""An If whose condition is a constant replaced by the nodes of the branch it takes (after --freeze, or when
folding decided the condition): OptimEP runs the nodes in its own partitions instead of leaving the If to the CPU
EP, and the passes see across the former branch boundary."""

from __future__ import annotations

import onnx
from onnx import helper

from ..graph import attr
from ..rule import Pass, PassContext


class InlineConstantIf(Pass):
    name = "inline_constant_if"
    summary = "replace an If with a constant condition by the branch it takes"

    def run(self, model: onnx.ModelProto, ctx: PassContext) -> tuple[onnx.ModelProto, bool]:
        changed = False
        g = ctx.view(model)
        for node in list(g.nodes):
            if node.op_type != "If" or not g.is_default_domain(node):
                continue
            cond = g.constant(node.input[0])
            if cond is None:
                continue
            if cond.size != 1:
                ctx.refused(self.name, node, f"its condition holds {cond.size} values, not one")
                continue
            taken = bool(cond.reshape(-1)[0])
            branch: onnx.GraphProto = attr(node, "then_branch" if taken else "else_branch")
            # Value names are unique across a model and its subgraphs, so the branch's nodes and initializers
            # move out as they are; each branch output reaches the If's output through an Identity, which
            # remove_identity then folds.
            names = {n.name for n in g.nodes if n.name}
            moved = []
            for inner in branch.node:
                copy = onnx.NodeProto()
                copy.CopyFrom(inner)
                if not copy.name or copy.name in names:
                    copy.name = g.fresh_name(f"{node.name or 'if'}_{copy.op_type.lower()}")
                names.add(copy.name)
                moved.append(copy)
            moved += [helper.make_node("Identity", [out.name], [result], name=g.fresh_name(f"{node.name or 'if'}_out"))
                      for out, result in zip(branch.output, node.output) if result]
            model.graph.initializer.extend(branch.initializer)
            model.graph.value_info.extend(branch.value_info)
            g.replace([node], moved)  # reindexes, initializers included
            ctx.rewrote(self.name, node, f"its condition is {taken}: the {'then' if taken else 'else'} branch's "
                                         f"{len(branch.node)} node(s) inlined")
            changed = True
        if changed:
            ctx.invalidate()
        return model, changed
