"""fuse_layer_norm: the written-out LayerNorm -> LayerNormalization (opset 17, raised when safe)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
X = {"x": RNG.standard_normal((2, 5, 8)).astype(np.float32)}
AFFINE = {"gamma": RNG.uniform(0.5, 1.5, 8).astype(np.float32), "beta": RNG.standard_normal(8).astype(np.float32)}
CONSTS = {"two": np.float32(2), "eps": np.float32(1e-5), "axes": np.array([-1], np.int64)}

# As PyTorch's TorchScript exporter writes nn.LayerNorm before opset 17 (axes as an attribute).
ATTRIBUTE_AXES = """    mean = ReduceMean <axes = [-1]> (x)
    d = Sub(x, mean)
    sq = Pow(d, two)
    var = ReduceMean <axes = [-1]> (sq)
    ve = Add(var, eps)
    std = Sqrt(ve)
    n = Div(d, std)
"""
OPSET16 = "g (float[2, 5, 8] x) => (float[2, 5, 8] y) {\n" + ATTRIBUTE_AXES + """    s = Mul(n, gamma)
    y = Add(s, beta)
}"""


# mean and x - mean come first in every variant; VARIANCE is the usual std computation.
VARIANCE = """    sq = Pow(d, two)
    var = ReduceMean(sq, axes)
    ve = Add(var, eps)
    std = Sqrt(ve)
"""


def _opset18(tail: str, extra_inputs: str = "", outputs: str = "float[2, 5, 8] y") -> str:
    return f"""g (float[2, 5, 8] x{extra_inputs}) => ({outputs}) {{
    mean = ReduceMean(x, axes)
    d = Sub(x, mean)
{tail}
}}"""


def test_opset16_export_form_becomes_layer_normalization_and_the_opset_rises_to_17():
    m = model(OPSET16, opset=16, **AFFINE, two=np.float32(2), eps=np.float32(1e-5))
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ["LayerNormalization"] and ctx.rewrites["fuse_layer_norm"] == 1
    node = out.graph.node[0]
    assert list(node.input) == ["x", "gamma", "beta"] and list(node.output) == ["y"]
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {"axis": -1, "epsilon": np.float32(1e-5)}
    assert out.opset_import[0].version == 17
    assert_same_outputs(m, out, X)


def test_reciprocal_form_without_affine_gets_a_unit_scale():
    m = model(_opset18("""    sq = Mul(d, d)
    var = ReduceMean(sq, axes)
    ve = Add(eps, var)
    std = Sqrt(ve)
    r = Reciprocal(std)
    y = Mul(d, r)"""), **CONSTS)
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ["LayerNormalization"] and ctx.rewrites["fuse_layer_norm"] == 1
    assert_same_outputs(m, out, X)


def test_a_runtime_scale_stays_outside_the_fused_node():
    m = model(_opset18(VARIANCE + "    n = Div(d, std)\n    y = Mul(n, g)", extra_inputs=", float[8] g"), **CONSTS)
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ["LayerNormalization", "Mul"] and ctx.rewrites["fuse_layer_norm"] == 1
    assert_same_outputs(m, out, {**X, "g": AFFINE["gamma"]})


def test_refuses_when_x_minus_mean_is_a_graph_output():
    m = model(_opset18(VARIANCE + "    y = Div(d, std)", outputs="float[2, 5, 8] y, float[2, 5, 8] d"), **CONSTS)
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ops(m) and ctx.rewrites["fuse_layer_norm"] == 0
    assert refusals(ctx) == ["'d' is a graph output"]


def test_refuses_axes_that_are_not_the_trailing_dims():
    m = model(_opset18(VARIANCE + "    y = Div(d, std)"), **{**CONSTS, "axes": np.array([1], np.int64)})
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["axes [1] are not the trailing dims of x (rank 3)"]


def test_refuses_when_raising_the_opset_would_change_another_op():
    # BatchNormalization-14 changed its outputs: an opset-13 model cannot simply be read as 17.
    text = ("g (float[2, 5, 8] x, float[1, 2, 3, 3] img) => (float[2, 5, 8] n, float[1, 2, 3, 3] z) {\n"
            + ATTRIBUTE_AXES + "    z = BatchNormalization(img, ones, ones, ones, ones)\n}")
    m = model(text, opset=13, two=np.float32(2), eps=np.float32(1e-5), ones=np.ones(2, np.float32))
    out, ctx = apply("fuse_layer_norm", m)
    assert ops(out) == ops(m) and ctx.rewrites["fuse_layer_norm"] == 0
    assert refusals(ctx) == ["LayerNormalization needs opset 17 and the model's opset 13 cannot be raised: "
                             "BatchNormalization changed meaning in opset 14"]
