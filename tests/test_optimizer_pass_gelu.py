"""fuse_gelu: x * 0.5 * (1 + erf(x / sqrt(2))) in its exported operand orders -> Gelu (opset 20)."""

from __future__ import annotations

import math

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32) * 3}
CONSTS = {"sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}


def _model(body: str, opset: int = 20, outputs: str = "float[3, 16] y", extra: str = "", **consts):
    return model(f"""g (float[3, 16] x{extra}) => ({outputs}) {{
{body}
}}""", opset=opset, **{**CONSTS, **consts})


DYNAMO = """    s = Div(x, sqrt2)
    e = Erf(s)
    u = Add(e, one)
    h = Mul(half, u)
    y = Mul(x, h)"""

TORCHSCRIPT = """    s = Div(x, sqrt2)
    e = Erf(s)
    u = Add(e, one)
    p = Mul(x, u)
    y = Mul(p, half)"""

HALF_FIRST = """    s = Mul(inv_sqrt2, x)
    e = Erf(s)
    u = Add(one, e)
    h = Mul(x, half)
    y = Mul(h, u)"""


def test_each_exported_order_becomes_one_gelu():
    for body, extra in ((DYNAMO, {}), (TORCHSCRIPT, {}), (HALF_FIRST, {"inv_sqrt2": np.float32(1 / math.sqrt(2))})):
        m = _model(body, **extra)
        out, ctx = apply("fuse_gelu", m)
        assert ops(out) == ["Gelu"] and ctx.rewrites["fuse_gelu"] == 1, body
        assert list(out.graph.node[0].input) == ["x"] and list(out.graph.node[0].output) == ["y"]
        assert_same_outputs(m, out, X)


def test_opset18_model_is_raised_to_20():
    m = _model(TORCHSCRIPT, opset=18)
    out, ctx = apply("fuse_gelu", m)
    assert ops(out) == ["Gelu"] and out.opset_import[0].version == 20
    assert ctx.events[0].message.endswith("(opset 18 -> 20)")
    assert_same_outputs(m, out, X)


def test_refuses_a_wrong_constant():
    m = _model(DYNAMO, sqrt2=np.float32(1.5))
    out, ctx = apply("fuse_gelu", m)
    assert ops(out) == ops(m) and ctx.rewrites["fuse_gelu"] == 0
    assert refusals(ctx) == ["the erf scale operand is 1.5, not 1.4142136"]


def test_refuses_when_a_value_inside_the_pattern_is_a_graph_output():
    m = _model(DYNAMO, outputs="float[3, 16] y, float[3, 16] e")
    out, ctx = apply("fuse_gelu", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["'e' is a graph output"]


def test_refuses_when_another_op_blocks_the_opset_upgrade():
    # GridSample-20 renamed its modes: an opset-18 model with one cannot be read as opset 20.
    m = _model(DYNAMO + "\n    z = GridSample(img, grid)", opset=18, outputs="float[3, 16] y, float[1, 1, 2, 2] z",
               extra=", float[1, 1, 4, 4] img, float[1, 2, 2, 2] grid")
    out, ctx = apply("fuse_gelu", m)
    assert ops(out) == ops(m) and ctx.rewrites["fuse_gelu"] == 0
    assert refusals(ctx) == ["Gelu needs opset 20 and the model's opset 18 cannot be raised: GridSample changed meaning in opset 20"]
