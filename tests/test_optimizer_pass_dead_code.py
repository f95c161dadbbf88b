"""remove_dead_nodes and remove_unused_initializers."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}


def test_dead_chain_is_removed_in_one_run():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        y = Relu(x)
        a = Sigmoid(x)
        b = Neg(a)
    }""")
    out, ctx = apply("remove_dead_nodes", m)
    assert ops(out) == ["Relu"] and ctx.rewrites["remove_dead_nodes"] == 2
    assert_same_outputs(m, out, X)


def test_node_read_only_inside_a_subgraph_stays():
    then = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "then", [], [helper.make_empty_tensor_value_info("t")])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [helper.make_empty_tensor_value_info("e")])
    m = model("""g (float[2, 3] x, bool c) => (float[2, 3] y) {
        a = Relu(x)
        y = Identity(x)
    }""")
    m.graph.node[1].CopyFrom(helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other))
    onnx.checker.check_model(m, full_check=True)
    out, ctx = apply("remove_dead_nodes", m)
    assert ops(out) == ["Relu", "If"] and ctx.rewrites["remove_dead_nodes"] == 0


def test_unused_initializer_is_removed():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        y = Add(x, b)
    }""", b=np.ones(3, np.float32), unused=np.zeros(7, np.float32))
    out, ctx = apply("remove_unused_initializers", m)
    assert [t.name for t in out.graph.initializer] == ["b"] and ctx.rewrites["remove_unused_initializers"] == 1
    assert_same_outputs(m, out, X)


def test_refuses_an_initializer_that_is_also_a_graph_input():
    m = model("""g (float[2, 3] x, float[3] b) => (float[2, 3] y) {
        y = Relu(x)
    }""", b=np.ones(3, np.float32))
    out, ctx = apply("remove_unused_initializers", m)
    assert [t.name for t in out.graph.initializer] == ["b"] and ctx.rewrites["remove_unused_initializers"] == 0
    assert refusals(ctx) == ["it is also a graph input: removing it would change the model's inputs"]
