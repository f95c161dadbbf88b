"""collapse_reshapes: Reshape -> Reshape skips the first; Reshapes to the same shape dropped."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
I64 = np.int64


def test_second_reshape_reads_the_first_ones_input():
    m = model("""g (float[2, 3, 4] x) => (float[4, 6] y) {
        a = Reshape(x, s1)
        y = Reshape(a, s2)
    }""", s1=np.array([6, 4], I64), s2=np.array([4, -1], I64))
    out, ctx = apply("collapse_reshapes", m)
    assert ops(out) == ["Reshape"] and ctx.rewrites["collapse_reshapes"] == 1
    assert list(out.graph.node[0].input) == ["x", "s2"]
    assert_same_outputs(m, out, X)


def test_reshape_to_the_same_static_shape_is_dropped():
    m = model("""g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
        r = Relu(x)
        y = Reshape(r, s)
    }""", s=np.array([0, 3, -1], I64))
    out, ctx = apply("collapse_reshapes", m)
    assert ops(out) == ["Relu"] and list(out.graph.node[0].output) == ["y"]
    assert_same_outputs(m, out, X)


def test_refuses_when_the_second_shape_copies_dims_or_is_not_constant():
    m = model("""g (float[2, 3, 4] x, int64[2] s) => (float[6, 4] y, float[12, 2] z) {
        a = Reshape(x, s1)
        y = Reshape(a, zero)
        b = Reshape(x, s1)
        z = Reshape(b, s)
    }""", s1=np.array([6, 4], I64), zero=np.array([0, 4], I64))
    out, ctx = apply("collapse_reshapes", m)
    assert ops(out) == ops(m) and ctx.rewrites["collapse_reshapes"] == 0
    assert refusals(ctx) == ["the second Reshape's shape copies dims (0) from the first Reshape's output",
                             "the second Reshape's shape is not a constant (a 0 in it would copy a dim of the first's output)"]


def test_refuses_when_the_first_reshape_is_a_graph_output():
    m = model("""g (float[2, 3, 4] x) => (float[4, 6] y, float[6, 4] a) {
        a = Reshape(x, s1)
        y = Reshape(a, s2)
    }""", s1=np.array([6, 4], I64), s2=np.array([4, 6], I64))
    out, ctx = apply("collapse_reshapes", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["'a' is a graph output"]
