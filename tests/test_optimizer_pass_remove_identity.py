"""remove_identity: Identity and inference Dropout removed, graph output names kept."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}


def test_identity_between_nodes_is_removed():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        a = Relu(x)
        b = Identity(a)
        y = Sigmoid(b)
    }""")
    out, ctx = apply("remove_identity", m)
    assert ops(out) == ["Relu", "Sigmoid"] and ctx.rewrites["remove_identity"] == 1
    assert list(out.graph.node[1].input) == ["a"]
    assert_same_outputs(m, out, X)


def test_identity_at_a_graph_output_hands_its_name_to_the_producer():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        a = Relu(x)
        y = Identity(a)
    }""")
    out, ctx = apply("remove_identity", m)
    assert ops(out) == ["Relu"] and list(out.graph.node[0].output) == ["y"]
    assert [o.name for o in out.graph.output] == ["y"]
    assert_same_outputs(m, out, X)


def test_dropout_in_inference_is_removed():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        d = Dropout(x, ratio)
        y = Relu(d)
    }""", ratio=np.float32(0.5))
    out, ctx = apply("remove_identity", m)
    assert ops(out) == ["Relu"] and ctx.rewrites["remove_identity"] == 1
    assert_same_outputs(m, out, X)


def test_refuses_identity_from_graph_input_to_graph_output():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        y = Identity(x)
    }""")
    out, ctx = apply("remove_identity", m)
    assert ops(out) == ["Identity"] and ctx.rewrites["remove_identity"] == 0
    assert refusals(ctx) == ["it joins graph input 'x' to graph output 'y', which must keep both names"]


def test_refuses_dropout_that_may_train_or_whose_mask_is_used():
    m = model("""g (float[2, 3] x, bool t) => (float[2, 3] y, bool[2, 3] mask) {
        a = Dropout(x, , t)
        b, mask = Dropout(a)
        y = Relu(b)
    }""")
    out, ctx = apply("remove_identity", m)
    assert ops(out) == ["Dropout", "Dropout", "Relu"] and ctx.rewrites["remove_identity"] == 0
    assert sorted(refusals(ctx)) == ["its mask output 'mask' is used", "training_mode is not a constant"]
