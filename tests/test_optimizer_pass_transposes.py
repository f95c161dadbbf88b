"""collapse_transposes: Transpose -> Transpose merged (or removed when they cancel); identity perms dropped."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}


def test_two_transposes_become_one_with_the_composed_perm():
    m = model("""g (float[2, 3, 4] x) => (float[3, 4, 2] y) {
        a = Transpose <perm = [0, 2, 1]> (x)
        y = Transpose <perm = [2, 1, 0]> (a)
    }""")
    out, ctx = apply("collapse_transposes", m)
    assert ops(out) == ["Transpose"] and ctx.rewrites["collapse_transposes"] == 1
    assert list(out.graph.node[0].attribute[0].ints) == [1, 2, 0]
    assert_same_outputs(m, out, X)


def test_transposes_that_cancel_disappear():
    m = model("""g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
        r = Relu(x)
        a = Transpose <perm = [1, 2, 0]> (r)
        b = Transpose <perm = [2, 0, 1]> (a)
        y = Neg(b)
    }""")
    out, ctx = apply("collapse_transposes", m)
    assert ops(out) == ["Relu", "Neg"] and ctx.rewrites["collapse_transposes"] == 1
    assert_same_outputs(m, out, X)


def test_identity_perm_is_dropped_and_the_output_keeps_its_name():
    m = model("""g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
        r = Relu(x)
        y = Transpose <perm = [0, 1, 2]> (r)
    }""")
    out, ctx = apply("collapse_transposes", m)
    assert ops(out) == ["Relu"] and list(out.graph.node[0].output) == ["y"]
    assert_same_outputs(m, out, X)


def test_refuses_when_the_first_transpose_has_another_reader_or_is_an_output():
    m = model("""g (float[2, 3, 4] x) => (float[3, 4, 2] y, float[2, 4, 3] z, float[4, 3, 2] w, float[3, 2, 4] c) {
        a = Transpose <perm = [0, 2, 1]> (x)
        y = Transpose <perm = [2, 1, 0]> (a)
        z = Neg(a)
        c = Transpose <perm = [1, 0, 2]> (x)
        w = Transpose <perm = [2, 0, 1]> (c)
    }""")
    out, ctx = apply("collapse_transposes", m)
    assert ops(out) == ops(m) and ctx.rewrites["collapse_transposes"] == 0
    assert refusals(ctx) == ["'a' is also read by Neg -> z", "'c' is a graph output"]
