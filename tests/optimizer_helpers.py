"""Helpers for the optimizer's tests: models from ONNX text, one pass applied, numerics compared on
ONNX Runtime's CPU EP with graph optimizations off."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from helpers import IR_VERSION, assert_close, run_cpu
from optim.optimizer import Match, Pass, PassContext, Rule
from optim.optimizer.manager import apply_pass
from optim.optimizer.passes import PASSES

PASS_BY_NAME = {p.name: p for p in PASSES}


def model(text: str, opset: int = 18, **initializers: np.ndarray) -> onnx.ModelProto:
    """A model from ONNX text syntax (a graph; the model header with IR 10 and `opset` is added)
    plus initializers given as arrays (not declared in the text); checked with onnx.checker's full check."""
    m = onnx.parser.parse_model(f'<ir_version: {IR_VERSION}, opset_import: ["" : {opset}]>\n' + text)
    for name, value in initializers.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    onnx.checker.check_model(m, full_check=True)
    return m


def apply(pass_name: str, m: onnx.ModelProto) -> tuple[onnx.ModelProto, PassContext]:
    """One run of the named pass on a copy of `m`; the copy is checked afterwards."""
    work = onnx.ModelProto()
    work.CopyFrom(m)
    ctx = PassContext()
    work, modified = apply_pass(PASS_BY_NAME[pass_name](), work, ctx)
    assert modified == (ctx.rewrites[pass_name] > 0)
    onnx.checker.check_model(work, full_check=True)
    return work, ctx


def ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node]


def refusals(ctx: PassContext) -> list[str]:
    return [e.message for e in ctx.events if e.kind == "refusal"]


def assert_same_outputs(before: onnx.ModelProto, after: onnx.ModelProto, feeds: dict, atol: float = 1e-5, rtol: float = 1e-5):
    """Both models on the CPU EP (optimizations off): same output names, values within tolerance."""
    assert [o.name for o in before.graph.output] == [o.name for o in after.graph.output]
    want = run_cpu(before.SerializeToString(), feeds)
    got = run_cpu(after.SerializeToString(), feeds)
    for name, g, w in zip([o.name for o in before.graph.output], got, want):
        assert_close(g, w, atol=atol, rtol=rtol, what=name)


class AddBecomesSub(Rule):
    """A deliberately broken pass (test double): turns every Add into a Sub."""

    name = "add_becomes_sub"
    summary = "broken on purpose"
    anchors = frozenset({"Add"})

    def pattern(self, g, node):
        return Match([node])

    def check(self, g, m):
        return None

    def rewrite(self, g, m):
        m.nodes[0].op_type = "Sub"
        return "Add -> Sub"


class DropFirstNode(Pass):
    """A deliberately broken pass (test double): deletes the first node, leaving its readers dangling."""

    name = "drop_first_node"
    summary = "broken on purpose"

    def run(self, model, ctx):
        if not model.graph.node:
            return model, False
        ctx.rewrote(self.name, model.graph.node[0].name or "first", "deleted")
        del model.graph.node[0]
        return model, True
