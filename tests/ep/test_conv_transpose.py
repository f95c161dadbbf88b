"""ConvTranspose on OptimEP (GEMM of the transposed weights by the input's pixels, then col2im) against ORT's CPU
EP on every ISA, over drawn geometries: 1-D and 2-D, groups, channel counts around the GEMM tiles, kernels 1-4,
strides, dilations, asymmetric pads, output_padding, auto_pad, output_shape, bias or none, constant or run-time
weights, batches that run image-groups in parallel; plus layers large enough for several pixel blocks."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import UnclaimedNodesError, placement, session

N = helper.make_node
RNG = np.random.default_rng(31)


@st.composite
def conv_transpose_cases(draw):
    spatial = draw(st.sampled_from([1, 2, 2]))
    c = dict(spatial=spatial, n=draw(st.sampled_from([1, 1, 2, 5])), groups=draw(st.integers(1, 2)), cin_g=draw(st.integers(1, 5)),
             cout_g=draw(st.sampled_from([1, 3, 8, 16, 17])), kernel=[draw(st.integers(1, 4)) for _ in range(spatial)],
             strides=[draw(st.integers(1, 3)) for _ in range(spatial)], dilations=[draw(st.integers(1, 2)) for _ in range(spatial)],
             size=[draw(st.integers(1, 6))] * (spatial - 1) + [draw(st.sampled_from([1, 3, 8, 17]))],
             auto_pad=draw(st.sampled_from(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])),
             bias=draw(st.booleans()), const_w=draw(st.booleans()), output_shape=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))
    # output_padding below the stride (ONNX Runtime refuses more: see test_values_onnx_runtime_refuses_are_errors).
    c["output_padding"] = [draw(st.integers(0, s - 1)) for s in c["strides"]]
    full = [(i - 1) * s + a + (k - 1) * d + 1 for i, s, a, k, d in zip(c["size"], c["strides"], c["output_padding"], c["kernel"],
                                                                      c["dilations"])]
    # Pads that leave at least one output pixel; output_shape from a few pixels below the unpadded size up to
    # the largest the input still maps to.
    c["pads"] = [draw(st.integers(0, min(2, (f - 1) // 2))) for f in full] * 2
    c["out"] = [max(1, f + draw(st.integers(-3, s - 1 - a))) for f, s, a in zip(full, c["strides"], c["output_padding"])]
    return c


def _check(c, isas=ISAS):
    rng = np.random.default_rng(c["seed"])
    cin, cout = c["cin_g"] * c["groups"], c["cout_g"] * c["groups"]
    x_shape = [c["n"], cin, *c["size"]]
    w = rng.standard_normal((cin, c["cout_g"], *c["kernel"])).astype(np.float32)
    attrs = dict(strides=c["strides"], dilations=c["dilations"], group=c["groups"], output_padding=c["output_padding"],
                 kernel_shape=c["kernel"])
    if c["output_shape"]:
        attrs["output_shape"] = c["out"]
    elif c["auto_pad"] != "NOTSET":
        attrs["auto_pad"] = c["auto_pad"]
    else:
        attrs["pads"] = c["pads"]
    inputs = {"x": (np.float32, x_shape)}
    inits = {"b": rng.standard_normal(cout).astype(np.float32)} if c["bias"] else {}
    if c["const_w"]:
        inits["w"] = w
    else:
        inputs["w"] = (np.float32, list(w.shape))
    model = make_model([N("ConvTranspose", ["x", "w"] + (["b"] if c["bias"] else []), ["y"], **attrs)], inputs, ["y"], inits)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)} | ({} if c["const_w"] else {"w": w})
    ref = run_cpu(model, feeds)[0]
    for isa in isas:
        got = session(model, fallback=False, isa=isa).run(None, feeds)[0]
        assert_close(got, ref, what=f"{isa} {c}")


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(conv_transpose_cases())
def test_conv_transpose_matches_the_cpu_ep_on_every_isa(c):
    _check(c)


@pytest.mark.parametrize("n, groups, cin_g, cout_g, size, kernel, stride", [
    (1, 1, 32, 64, [32, 32], [4, 4], [2, 2]),    # one image: the GEMM and col2im split over the pool, 16 pixel blocks
    (4, 2, 8, 16, [17, 20], [3, 3], [1, 1]),     # eight image-groups in parallel, stride 1 (col2im through the add kernel)
    (2, 1, 16, 8, [64], [5], [3]),               # 1-D, wide
])
def test_larger_layers_match_the_cpu_ep(n, groups, cin_g, cout_g, size, kernel, stride):
    pads = [1] * (2 * len(size))
    c = dict(spatial=len(size), n=n, groups=groups, cin_g=cin_g, cout_g=cout_g, kernel=kernel, strides=stride, dilations=[1] * len(size),
             size=size, auto_pad="NOTSET", bias=True, const_w=True, output_shape=False, pads=pads, out=None,
             output_padding=[0] * len(size), seed=5)
    _check(c)


@pytest.mark.parametrize("attrs, says", [
    (dict(strides=[2], output_padding=[2]), "output_padding 2 along spatial dim 0 is not below max(stride, dilation) 2"),
    (dict(strides=[1], dilations=[2], output_padding=[1]), "output size 8 along spatial dim 0 does not come from input size 3"),
    (dict(strides=[2], output_shape=[9]), "output size 9 along spatial dim 0 does not come from input size 3"),
])
def test_values_onnx_runtime_refuses_are_errors(attrs, says):
    model = make_model([N("ConvTranspose", ["x", "w"], ["y"], name="up", **attrs)], {"x": (np.float32, [1, 1, 3])}, ["y"],
                       {"w": rand(RNG, 1, 1, 3)})
    x = rand(RNG, 1, 1, 3)
    with pytest.raises(Exception):
        run_cpu(model, {"x": x})
    with pytest.raises(Exception, match=rf"(?s)'up'.*{re.escape(says)}"):
        session(model, fallback=False).run(None, {"x": x})


def test_three_spatial_dims_are_refused_with_the_reason():
    model = make_model([N("ConvTranspose", ["x", "w"], ["y"])], {"x": (np.float32, [1, 2, 3, 3, 3])}, ["y"],
                       {"w": rand(RNG, 2, 2, 2, 2, 2)})
    with pytest.raises(UnclaimedNodesError, match=r"ConvTranspose over 3 spatial dims is not supported \(1-D and 2-D are\)"):
        session(model, fallback=False)


def test_decoder_upsampling_runs_whole_on_optimep():
    """ConvTranspose(k2 s2) -> Relu -> ConvTranspose(k4 s2 p1): the usual decoder upsampling, one partition."""
    nodes = [N("ConvTranspose", ["x", "w1", "b1"], ["u1"], strides=[2, 2]), N("Relu", ["u1"], ["r1"]),
             N("ConvTranspose", ["r1", "w2", "b2"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])]
    model = make_model(nodes, {"x": (np.float32, ["n", 16, 7, 7])}, ["y"],
                       {"w1": rand(RNG, 16, 8, 2, 2), "b1": rand(RNG, 8), "w2": rand(RNG, 8, 3, 4, 4), "b2": rand(RNG, 3)})
    sess = session(model, fallback=False)
    assert placement(sess).optim_nodes == 3
    for batch in (1, 3):
        x = rand(RNG, batch, 16, 7, 7)
        assert_close(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])
