"""Identity and inference-mode Dropout nodes removed: their output is their input."""

from __future__ import annotations

from ..graph import GraphView
from ..rule import Match, Rule


class RemoveIdentity(Rule):
    name = "remove_identity"
    summary = "drop Identity nodes and Dropout nodes that cannot be in training mode"
    anchors = frozenset({"Identity", "Dropout"})

    def pattern(self, g: GraphView, node) -> Match | None:
        if not node.input or not node.input[0]:
            return None
        return Match([node], {"source": node.input[0], "target": node.output[0]})

    def check(self, g: GraphView, m: Match) -> str | None:
        node = m.nodes[0]
        if node.op_type == "Dropout":
            problem = _dropout_problem(g, node)
            if problem:
                return problem
        return g.bypass_problem(m["source"], m["target"])

    def rewrite(self, g: GraphView, m: Match) -> str:
        g.replace(m.nodes)
        g.bypass(m["source"], m["target"])
        return f"removed; readers of {m['target']!r} read {m['source']!r}"


def _dropout_problem(g: GraphView, node) -> str | None:
    # Dropout-12+ drops only when its training_mode input is true; before opset 7 a missing
    # is_test attribute meant training.
    if g.opset() < 7 and not any(a.name == "is_test" and a.i for a in node.attribute):
        return "Dropout before opset 7 without is_test=1 may run in training mode"
    if len(node.input) > 2 and node.input[2]:
        mode = g.constant(node.input[2])
        if mode is None:
            return "training_mode is not a constant"
        if mode.size != 1 or bool(mode.reshape(-1)[0]):
            return "training_mode is true"
    if len(node.output) > 1 and node.output[1] and (g.consumers(node.output[1]) or node.output[1] in g.outputs):
        return f"its mask output {node.output[1]!r} is used"
    return None
