"""matmul_add_to_gemm: MatMul + Add(constant bias) -> Gemm for 2-D operands only."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)
X = {"x": RNG.standard_normal((4, 8)).astype(np.float32)}


def test_matmul_plus_bias_becomes_gemm_in_either_operand_order():
    for add in ("Add(m, b)", "Add(b, m)"):
        m = model(f"""g (float[batch, 8] x) => (float[batch, 5] y) {{
            m = MatMul(x, w)
            y = {add}
        }}""", w=W, b=B)
        out, ctx = apply("matmul_add_to_gemm", m)
        assert ops(out) == ["Gemm"] and ctx.rewrites["matmul_add_to_gemm"] == 1
        assert list(out.graph.node[0].input) == ["x", "w", "b"] and list(out.graph.node[0].output) == ["y"]
        assert_same_outputs(m, out, X)


def test_refuses_3d_activations():
    m = model("""g (float[2, 4, 8] x) => (float[2, 4, 5] y) {
        m = MatMul(x, w)
        y = Add(m, b)
    }""", w=W, b=B)
    out, ctx = apply("matmul_add_to_gemm", m)
    assert ops(out) == ["MatMul", "Add"] and ctx.rewrites["matmul_add_to_gemm"] == 0
    assert refusals(ctx) == ["MatMul input A is 3-D; Gemm needs 2-D (a Reshape around it would add two nodes)"]


def test_refuses_a_bias_that_is_not_constant_or_does_not_broadcast_to_m_n():
    m = model("""g (float[batch, 8] x, float[5] b) => (float[batch, 5] y, float[3, batch, 5] z) {
        m = MatMul(x, w)
        y = Add(m, b)
        n = MatMul(x, w)
        z = Add(n, c)
    }""", w=W, c=np.ones((3, 1, 5), np.float32))
    out, ctx = apply("matmul_add_to_gemm", m)
    assert ops(out) == ops(m) and ctx.rewrites["matmul_add_to_gemm"] == 0
    assert refusals(ctx) == ["bias 'b' is not a constant", "bias is 3-D: the Add's output would have more dims than Gemm's"]


def test_refuses_when_the_matmul_output_is_also_a_graph_output():
    m = model("""g (float[4, 8] x) => (float[4, 5] y, float[4, 5] m) {
        m = MatMul(x, w)
        y = Add(m, b)
    }""", w=W, b=B)
    out, ctx = apply("matmul_add_to_gemm", m)
    assert ops(out) == ["MatMul", "Add"] and refusals(ctx) == ["'m' is a graph output"]
