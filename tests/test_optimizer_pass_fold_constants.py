"""fold_constants: Constant nodes -> initializers, static Shape/Size -> constants, nodes of constants evaluated."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
X = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}


def _initializer(m, name):
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == name)


def test_constant_node_becomes_an_initializer():
    m = model("""g (float[2, 3] x) => (float[2, 3] y) {
        c = Constant <value = float[1] {2.0}> ()
        y = Add(x, c)
    }""")
    out, ctx = apply("fold_constants", m)
    assert ops(out) == ["Add"] and ctx.rewrites["fold_constants"] == 1
    assert _initializer(out, "c").tolist() == [2.0]
    assert_same_outputs(m, out, X)


def test_node_of_constants_is_evaluated_once_and_chains_fold_in_one_run():
    m = model("""g (float[2, 3] x) => (float[2, 4] y) {
        t = Transpose <perm = [1, 0]> (w)
        s = Mul(t, two)
        y = MatMul(x, s)
    }""", w=RNG.standard_normal((4, 3)).astype(np.float32), two=np.float32(2))
    out, ctx = apply("fold_constants", m)
    assert ops(out) == ["MatMul"] and ctx.rewrites["fold_constants"] == 2
    np.testing.assert_array_equal(_initializer(out, "s"), _initializer(m, "w").T * 2)
    assert_same_outputs(m, out, X)


def test_shape_of_a_static_tensor_becomes_a_constant():
    m = model("""g (float[2, 3] x) => (float[3, 2] y) {
        r = Relu(x)
        s = Shape <start = 1> (r)
        y = Reshape(x, shape)
    }""", shape=np.array([3, 2], np.int64))
    out, ctx = apply("fold_constants", m)
    assert ops(out) == ["Relu", "Reshape"] and ctx.rewrites["fold_constants"] == 1
    assert _initializer(out, "s").tolist() == [3]


def test_slice_of_static_dims_of_a_dynamic_shape_becomes_a_constant():
    m = model("""g (float[batch, 4, 6] x) => (float[batch, 24] y) {
        s = Shape(x)
        a = Slice(s, zero, one)
        b = Slice(s, one, three)
        p = ReduceProd <keepdims = 1> (b)
        c = Concat <axis = 0> (a, p)
        y = Reshape(x, c)
    }""", zero=np.array([0], np.int64), one=np.array([1], np.int64), three=np.array([3], np.int64))
    out, ctx = apply("fold_constants", m)
    # the batch dim stays computed; the static 4x6 part folds, and so does its product
    assert ops(out) == ["Shape", "Slice", "Concat", "Reshape"] and ctx.rewrites["fold_constants"] == 2
    assert _initializer(out, "p").tolist() == [24]
    assert_same_outputs(m, out, {"x": RNG.standard_normal((5, 4, 6)).astype(np.float32)})


def test_refuses_a_constant_that_is_a_graph_output():
    m = model("""g (float[2, 3] x) => (float[2, 3] y, float[1] c) {
        c = Constant <value = float[1] {2.0}> ()
        y = Add(x, c)
    }""")
    out, ctx = apply("fold_constants", m)
    assert ops(out) == ops(m) and ctx.rewrites["fold_constants"] == 0
    assert refusals(ctx) == ["its output 'c' is a graph output, which should stay computed by a node"]


def test_leaves_random_ops_dequantize_and_overridable_initializers_alone():
    m = model("""g (float[2, 3] x, float[3] v) => (float[2, 3] y) {
        r = RandomNormalLike(x)
        d = DequantizeLinear(q, scale)
        e = Add(d, v)
        a = Add(r, e)
        y = Add(x, a)
    }""", q=np.array([1, -2, 3], np.int8), scale=np.float32(0.5), v=np.ones(3, np.float32))
    out, ctx = apply("fold_constants", m)
    # v is an initializer but also a graph input: a caller may feed it, so Add(d, v) is not constant.
    assert ops(out) == ops(m) and ctx.rewrites["fold_constants"] == 0


def test_refuses_to_store_a_result_much_larger_than_its_inputs():
    m = model("""g (float[1024, 1024] x) => (float[1024, 1024] y) {
        big = Expand(one, shape)
        y = Add(x, big)
    }""", one=np.ones(1, np.float32), shape=np.array([1024, 1024], np.int64))
    out, ctx = apply("fold_constants", m)
    assert ops(out) == ["Expand", "Add"] and ctx.rewrites["fold_constants"] == 0
    assert refusals(ctx) == ["its 4.2 MB result is larger than its inputs; computing it at run time keeps the file small"]
