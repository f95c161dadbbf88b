"""The direct integer convolution over every geometry it claims: 1-D and 2-D, strides, dilations,
asymmetric padding, rectangular kernels, groups, widths around the kernel's 8-pixel segments, output
channel counts around its 8-, 16- and 32-wide tiles, uint8/int8 inputs and outputs, and weight zero points that keep the
weights in int8 (the VNNI form) or not (the int16-pair form). On every ISA the unit must equal an exact
int64 replica bit for bit, and stay within a quantization step of ORT's float QDQ reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from onnx import TensorProto, helper, numpy_helper

from conv_cases import conv_cases, depthwise_cases, row_window_case
from helpers import IR_VERSION, ISAS, requantize, run_cpu
from optim.ep_plugin import placement, session

INT8_STEP_TOLERANCE = 1  # quantization steps between OptimEP and the float QDQ reference
N = helper.make_node


def _model(c):
    rng = np.random.default_rng(c["seed"])
    x_np = np.uint8 if c["x_type"] == "u8" else np.int8
    cin, cout = c["cin_g"] * c["groups"], c["cout_g"] * c["groups"]
    x_zp = np.array(rng.integers(100, 156) if c["x_type"] == "u8" else rng.integers(-20, 20), dtype=x_np)
    w = rng.integers(-127, 128, size=(cout, c["cin_g"], *c["kernel"])).astype(np.int8)
    w_scale = rng.uniform(0.002, 0.01, size=cout).astype(np.float32)
    k = c["cin_g"] * int(np.prod(c["kernel"]))
    y_scale = np.float32(0.02 * 0.006 * np.sqrt(k) * 60)
    inits = {"x_scale": np.float32(0.02), "x_zp": x_zp, "w": w, "w_scale": w_scale,
             "w_zp": np.full(cout, c["w_zero"], np.int8), "b": rng.integers(-3000, 3000, size=cout).astype(np.int32),
             "b_scale": (np.float32(0.02) * w_scale).astype(np.float32), "y_scale": y_scale,
             "y_zp": np.array(128, np.uint8) if c["y_type"] == "u8" else np.array(-7, np.int8)}
    nodes = [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"]),
             N("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], axis=0),
             N("DequantizeLinear", ["b", "b_scale"], ["bf"], axis=0),
             N("Conv", ["xf", "wf", "bf"], ["cv"], strides=c["strides"], dilations=c["dilations"], pads=c["pads"],
               group=c["groups"], kernel_shape=c["kernel"])]
    last = "cv"
    if c["relu"]:
        nodes.append(N("Relu", ["cv"], ["r"]))
        last = "r"
    nodes.append(N("QuantizeLinear", [last, "y_scale", "y_zp"], ["y"]))
    shape = [c["n"], cin, *c["size"]]
    graph = helper.make_graph(nodes, "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8 if x_np is np.uint8 else TensorProto.INT8, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8 if c["y_type"] == "u8" else TensorProto.INT8, None)],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(x_np)
    return model, rng.integers(info.min, info.max + 1, size=shape).astype(x_np), inits


def _replica(x, c, p):
    """Exact int64 convolution of (x - zx) and (w - zw) with zero padding, then the epilogue in float32."""
    sp = c["spatial"]
    if sp == 1:  # as 2-D with height 1
        c = dict(c, spatial=2, kernel=[1, *c["kernel"]], strides=[1, *c["strides"]], dilations=[1, *c["dilations"]],
                 pads=[0, c["pads"][0], 0, c["pads"][1]])
        x, p = x[:, :, None, :], dict(p, w=p["w"][:, :, None, :])
    (kh, kw), (sh, sw), (dh, dw) = c["kernel"], c["strides"], c["dilations"]
    wq = p["w"].astype(np.int64) - np.int64(c["w_zero"])
    xs = np.pad(x.astype(np.int64) - np.int64(p["x_zp"]),
                ((0, 0), (0, 0), (c["pads"][0], c["pads"][2]), (c["pads"][1], c["pads"][3])))
    n, _, hp, wp = xs.shape
    oh, ow = (hp - (kh - 1) * dh - 1) // sh + 1, (wp - (kw - 1) * dw - 1) // sw + 1
    cout, cin_g = wq.shape[:2]
    g, cout_g = c["groups"], cout // c["groups"]
    acc = np.zeros((n, cout, oh, ow), np.int64)
    for gi in range(g):
        xg = xs[:, gi * cin_g:(gi + 1) * cin_g]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
                acc[:, gi * cout_g:(gi + 1) * cout_g] += np.einsum("nchw,oc->nohw", patch, wq[gi * cout_g:(gi + 1) * cout_g, :, ky, kx])
    bias = (p["b"].astype(np.float32) * p["b_scale"]).astype(np.float32)
    info = np.iinfo(p["y_zp"].dtype)
    y = requantize(acc, p["x_scale"], p["w_scale"], p["y_scale"], p["y_zp"], int(p["y_zp"]) if c["relu"] else info.min,
                   info.max, bias, channel_axis=1).astype(p["y_zp"].dtype)
    return y[:, :, 0, :] if sp == 1 else y


def _check_integer_convolution(c):
    model, x, p = _model(c)
    want = _replica(x, c, p)
    ref = run_cpu(model, {"x": x})[0]
    assert np.abs(want.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert placement(sess).integer_units == 1, (isa, c)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want, err_msg=f"{isa} {c}")


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(conv_cases())
def test_integer_convolution_equals_the_exact_replica_on_every_isa(c):
    _check_integer_convolution(c)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(depthwise_cases())
def test_integer_depthwise_convolution_equals_the_exact_replica_on_every_isa(c):
    _check_integer_convolution(c)


@pytest.mark.parametrize("channels", [3, 17, 96])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_integer_depthwise_windows_along_a_row_equal_the_exact_replica(channels, k):
    _check_integer_convolution(row_window_case(channels, k, x_type="u8", y_type="u8", w_zero=0))


@pytest.mark.parametrize("channels", [3, 17, 96])
@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("x_type", ["u8", "s8"])
def test_strided_integer_depthwise_reads_the_bytes_exactly(channels, k, x_type):
    """Stride 2 both ways: the kernels convert the input bytes as they read them (no float copy), channel tails
    included (3 and 17 channels end inside a vector), rows wide enough for the eight-pixel windows."""
    _check_integer_convolution(dict(
        spatial=2, n=2, groups=channels, cin_g=1, cout_g=1, kernel=[k, k], strides=[2, 2], dilations=[1, 1],
        pads=[k // 2] * 4, size=[9, 37], x_type=x_type, y_type="u8", w_zero=0, relu=False, seed=channels * k))
