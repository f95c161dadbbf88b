"""fold_conv_bn: inference BatchNormalization folded into the Conv before it."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
X = {"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)}
SIG = "(float[2, 3, 6, 6] x) => (float[2, 4, 6, 6] y)"


def _params(bias: bool = True) -> dict:
    p = {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
         "s": RNG.uniform(0.5, 2, 4).astype(np.float32), "beta": RNG.standard_normal(4).astype(np.float32),
         "mean": RNG.standard_normal(4).astype(np.float32), "var": RNG.uniform(0.5, 2, 4).astype(np.float32)}
    if bias:
        p["b"] = RNG.standard_normal(4).astype(np.float32)
    return p


def test_conv_with_bias_then_bn_becomes_one_conv():
    m = model(f"""g {SIG} {{
        c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
        y = BatchNormalization <epsilon = 0.001> (c, s, beta, mean, var)
    }}""", **_params())
    out, ctx = apply("fold_conv_bn", m)
    assert ops(out) == ["Conv"] and ctx.rewrites["fold_conv_bn"] == 1
    assert list(out.graph.node[0].output) == ["y"]
    assert_same_outputs(m, out, X)


def test_conv_without_bias_gets_one():
    m = model(f"""g {SIG} {{
        c = Conv <pads = [1, 1, 1, 1]> (x, w)
        y = BatchNormalization(c, s, beta, mean, var)
    }}""", **_params(bias=False))
    out, ctx = apply("fold_conv_bn", m)
    assert ops(out) == ["Conv"] and len(out.graph.node[0].input) == 3
    assert_same_outputs(m, out, X)


def test_refuses_non_constant_bn_scale():
    params = _params()
    del params["s"]
    m = model("""g (float[2, 3, 6, 6] x, float[4] s) => (float[2, 4, 6, 6] y) {
        c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
        y = BatchNormalization(c, s, beta, mean, var)
    }""", **params)
    out, ctx = apply("fold_conv_bn", m)
    assert ops(out) == ["Conv", "BatchNormalization"] and ctx.rewrites["fold_conv_bn"] == 0
    assert refusals(ctx) == ["BatchNormalization scale 's' is not a constant"]


def test_refuses_a_weight_shared_with_another_conv():
    m = model("""g (float[2, 3, 6, 6] x) => (float[2, 4, 6, 6] y, float[2, 4, 6, 6] z) {
        c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
        y = BatchNormalization(c, s, beta, mean, var)
        z = Conv <pads = [1, 1, 1, 1]> (x, w)
    }""", **_params())
    out, ctx = apply("fold_conv_bn", m)
    assert ops(out) == ops(m) and ctx.rewrites["fold_conv_bn"] == 0
    assert refusals(ctx) == ["initializer 'w' is shared with Conv -> z"]


def test_refuses_when_the_conv_output_is_a_graph_output():
    m = model("""g (float[2, 3, 6, 6] x) => (float[2, 4, 6, 6] y, float[2, 4, 6, 6] c) {
        c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
        y = BatchNormalization(c, s, beta, mean, var)
    }""", **_params())
    out, ctx = apply("fold_conv_bn", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["'c' is a graph output"]
