"""QuantizeLinear(Resize(DequantizeLinear(x))) runs on the quantized bytes (rewrites/quantized_data_movement.cc).
Nearest: Resize only picks values, so with equal quantization on both sides the bytes move unchanged, and
between different ones a 256-byte table (qdq_lut) requantizes before the pick. Linear: QResize dequantizes its
four sources, blends them in float32 as ONNX Runtime's Resize does and quantizes as QuantizeLinear does. The
results equal ONNX Runtime's CPU EP running the float Resize between the Q/DQ pair, exactly, on every ISA, in
NCHW and in the channels-last forms (NhwcResize, NhwcQResize) between quantized convolutions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, step_ops
from optim.ep_plugin import placement, session

N = helper.make_node
NP_OF = {"u8": np.uint8, "s8": np.int8}
ONNX_OF = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8}


def _ops(sess) -> list[str]:
    return step_ops([s for ss in placement(sess).compiled.values() for s in ss])


def _bytes(rng, t, shape):
    info = np.iinfo(NP_OF[t])
    return rng.integers(info.min, info.max + 1, shape).astype(NP_OF[t])


def _model(t, shape, *, scales=None, sizes=None, out_t=None, out_scale=None, opset=19, seed=0, scale=0.05, zero=None,
           **attrs):
    """x (t) -> DQ -> Resize -> Q -> y: quantized as the input unless out_t / out_scale say otherwise."""
    rng = np.random.default_rng(seed)
    out_t = out_t or t
    zero = (7 if t == "u8" else -7) if zero is None else zero
    inits = {"s": np.float32(scale), "z": np.array(zero, NP_OF[t]),
             "sy": np.float32(out_scale or 0.05), "zy": np.array(7 if out_t == "u8" else -7, NP_OF[out_t])}
    if out_t == t and out_scale is None:
        inits["sy"], inits["zy"] = inits["s"], inits["z"]
    resize_in = ["d", "", ""]
    if 11 <= opset < 13:  # roi is not optional there
        inits["roi"] = np.zeros([0], np.float32)
        resize_in[1] = "roi"
    if opset < 11:  # Resize-10 reads (X, scales)
        resize_in = ["d", "scales"]
        inits["scales"] = np.asarray(scales, np.float32)
    elif scales is not None:
        inits["scales"] = np.asarray(scales, np.float32)
        resize_in[2] = "scales"
    else:
        inits["sizes"] = np.asarray(sizes, np.int64)
        resize_in.append("sizes")
    nodes = [N("DequantizeLinear", ["x", "s", "z"], ["d"]),
             N("Resize", resize_in, ["r"], name="resize", **attrs),
             N("QuantizeLinear", ["r", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qresize", [helper.make_tensor_value_info("x", ONNX_OF[t], shape)],
                              [helper.make_tensor_value_info("y", ONNX_OF[out_t], None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": _bytes(rng, t, shape)}


NEAREST = [
    dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"),  # PyTorch's nearest
    dict(coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor"),
    dict(coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"),
    dict(coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="ceil"),
]
SIZES = [
    dict(scales=[1, 1, 2, 2]),
    dict(scales=[1, 1, 1.5, 0.75]),  # non-integer, one dim down
    dict(sizes=[2, 3, 11, 4]),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", ["u8", "s8"])
@pytest.mark.parametrize("size", SIZES, ids=["x2", "x1.5x0.75", "sizes"])
@pytest.mark.parametrize("attrs", NEAREST, ids=lambda a: a["coordinate_transformation_mode"])
def test_a_nearest_resize_between_equal_quantizations_moves_bytes(t, size, attrs, isa):
    model, feeds = _model(t, [2, 3, 5, 6], mode="nearest", seed=len(size), **size, **attrs)
    sess = session(model, fallback=False, isa=isa)
    assert _ops(sess) == ["Resize"], _ops(sess)
    assert placement(sess).rewrites == {"quantized_data_movement": 1}, placement(sess).rewrites
    got = sess.run(None, feeds)[0]
    assert got.dtype == NP_OF[t]
    np.testing.assert_array_equal(got, run_cpu(model, feeds)[0])


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(t=st.sampled_from(["u8", "s8"]), h=st.integers(1, 9), w=st.integers(1, 9), by_sizes=st.booleans(),
       fy=st.sampled_from([0.5, 0.75, 1.0, 1.3, 2.0, 2.5, 3.0]), fx=st.sampled_from([0.6, 1.0, 1.5, 2.0, 4.0]),
       attrs=st.sampled_from(NEAREST), requantize=st.booleans())
def test_drawn_nearest_resizes_on_bytes_equal_onnx(t, h, w, by_sizes, fy, fx, attrs, requantize):
    """Drawn sizes and factors (outputs of one pixel, shrinking and growing dims) on every ISA."""
    oh, ow = max(1, int(h * fy)), max(1, int(w * fx))
    size = dict(sizes=[1, 2, oh, ow]) if by_sizes else dict(scales=[1, 1, fy if h * fy >= 1 else 1.0, fx if w * fx >= 1 else 1.0])
    model, feeds = _model(t, [1, 2, h, w], mode="nearest", out_scale=0.07 if requantize else None, seed=h * 10 + w,
                          **size, **attrs)
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert "Resize" in _ops(sess) and "DequantizeLinear" not in _ops(sess), _ops(sess)
        np.testing.assert_array_equal(sess.run(None, feeds)[0], ref, err_msg=f"{isa} {size} {attrs}")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t,out_t", [("u8", "u8"), ("s8", "s8"), ("u8", "s8")])
def test_a_nearest_resize_between_different_quantizations_picks_requantized_bytes(t, out_t, isa):
    for size in SIZES:
        model, feeds = _model(t, [2, 3, 5, 6], mode="nearest", out_t=out_t, out_scale=0.031, seed=3, **size)
        sess = session(model, fallback=False, isa=isa)
        assert sorted(_ops(sess)) == ["QLut", "Resize"], _ops(sess)
        assert placement(sess).rewrites == {"quantized_data_movement": 1, "qdq_lookup_tables": 1}, placement(sess).rewrites
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


@pytest.mark.parametrize("scales", [[1, 1, 3, 2], [1, 1, 0.6, 1.5]])
def test_opset_10_and_11_nearest_resizes_run_on_bytes(scales):
    """Resize-10 has no nearest_mode: ONNX Runtime truncates, or takes the ceiling along a shrinking dim."""
    for opset in (10, 11):
        model, feeds = _model("u8", [1, 2, 5, 4], scales=scales, mode="nearest", opset=opset)
        sess = session(model, fallback=False)
        assert _ops(sess) == ["Resize"], (opset, _ops(sess))
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t,out_t,out_scale", [("u8", "u8", None), ("s8", "s8", None), ("u8", "u8", 0.031), ("s8", "u8", 0.02)])
@pytest.mark.parametrize("attrs", NEAREST, ids=lambda a: a["coordinate_transformation_mode"])
def test_a_linear_resize_blends_bytes_exactly_as_the_float_resize_between_q_and_dq(t, out_t, out_scale, attrs, isa):
    for k, size in enumerate(SIZES + [dict(scales=[1, 1, 1, 1.3]), dict(sizes=[2, 3, 5, 6])]):  # the last: a copy
        model, feeds = _model(t, [2, 3, 5, 6], mode="linear", out_t=out_t, out_scale=out_scale, seed=k,
                              coordinate_transformation_mode=attrs["coordinate_transformation_mode"], **size)
        sess = session(model, fallback=False, isa=isa)
        assert _ops(sess) == ["QResize"], _ops(sess)
        assert placement(sess).rewrites == {"quantized_data_movement": 1}, placement(sess).rewrites
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], err_msg=str(size))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(t=st.sampled_from(["u8", "s8"]), h=st.integers(1, 9), w=st.integers(1, 9), oh=st.integers(1, 19),
       ow=st.integers(1, 19), ct=st.sampled_from([a["coordinate_transformation_mode"] for a in NEAREST]),
       out_scale=st.sampled_from([None, 0.013, 0.2]))
def test_drawn_linear_resizes_on_bytes_equal_onnx(t, h, w, oh, ow, ct, out_scale):
    model, feeds = _model(t, [1, 2, h, w], mode="linear", sizes=[1, 2, oh, ow], out_scale=out_scale, seed=h * 10 + w,
                          coordinate_transformation_mode=ct)
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert _ops(sess) == ["QResize"], _ops(sess)
        np.testing.assert_array_equal(sess.run(None, feeds)[0], ref, err_msg=isa)


def test_a_resize_before_a_per_channel_quantize_stays_float_and_says_why():
    """A per-channel QuantizeLinear after the Resize has no one scale to requantize into: float, with the reason."""
    for mode, reason in (("linear", "its QuantizeLinear is not per tensor with a constant scale"),
                         ("nearest", "its input and output are quantized differently")):
        model, feeds = _model("u8", [1, 3, 4, 4], scales=[1, 1, 2, 2], mode=mode)
        m = onnx.load_from_string(model)
        for init in m.graph.initializer:
            if init.name == "sy":
                init.CopyFrom(numpy_helper.from_array(np.float32([0.05, 0.06, 0.07]), "sy"))
            if init.name == "zy":
                init.CopyFrom(numpy_helper.from_array(np.array([7, 7, 7], np.uint8), "zy"))
        model = m.SerializeToString()
        sess = session(model, fallback=False)
        p = placement(sess)
        assert "quantized_data_movement" not in p.rewrites and "Resize" in _ops(sess), _ops(sess)
        assert f"quantized_data_movement: Resize 'resize': {reason}" in p.rewrite_refusals, p.rewrite_refusals
        np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


def test_a_uint8_model_input_resizes_nearest_directly_and_refuses_linear_with_the_reason():
    def model(mode):
        nodes = [N("Resize", ["x", "", "scales"], ["y"], name="resize", mode=mode)]
        graph = helper.make_graph(nodes, "u8resize", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 3, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                                  [numpy_helper.from_array(np.asarray([1, 1, 2, 1.5], np.float32), "scales")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()

    feeds = {"x": _bytes(np.random.default_rng(1), "u8", [1, 2, 3, 3])}
    nearest = model("nearest")
    np.testing.assert_array_equal(session(nearest, fallback=False).run(None, feeds)[0], run_cpu(nearest, feeds)[0])
    why = [n.reason for n in placement(session(model("linear"))).nodes if n.node == "resize"]
    assert why and "is uint8" in why[0] and "in linear mode; nearest runs uint8/int8" in why[0], why


def test_a_float_nearest_resize_copies_infinities_and_nan_where_they_are():
    """The nearest path copies values (a blend with zero weights made 0 * inf = NaN beside an infinity)."""
    nodes = [N("Resize", ["x", "", "scales"], ["y"], name="resize", mode="nearest")]
    graph = helper.make_graph(nodes, "special", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.float32([1, 1, 2, 1.5]), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    feeds = {"x": np.float32([[[[np.inf, 1, -np.inf], [2, np.nan, 3]]]])}
    for isa in ISAS:
        np.testing.assert_array_equal(session(model, fallback=False, isa=isa).run(None, feeds)[0], run_cpu(model, feeds)[0])


def _conv_resize_conv(t, seed, mode="nearest"):
    """Q(image) -> QDQ Conv -> DQ -> nearest Resize x2 -> Q -> QDQ Conv: the Resize's quantized input and
    output are graph outputs too (c1, r), so the test can check the pick exactly."""
    rng = np.random.default_rng(seed)
    z = np.array(128 if t == "u8" else 0, NP_OF[t])
    inits = {"s": np.float32(0.03), "z": z, "ws": np.float32(0.01), "s1": np.float32(0.1), "s2": np.float32(0.2),
             "w1": rng.integers(-127, 128, (16, 3, 3, 3)).astype(np.int8),
             "w2": rng.integers(-127, 128, (16, 16, 3, 3)).astype(np.int8), "scales": np.float32([1, 1, 2, 2])}
    nodes = [N("QuantizeLinear", ["x", "s", "z"], ["xq"]), N("DequantizeLinear", ["xq", "s", "z"], ["xf"]),
             N("DequantizeLinear", ["w1", "ws"], ["w1f"]), N("Conv", ["xf", "w1f"], ["c1f"], pads=[1, 1, 1, 1], name="conv1"),
             N("QuantizeLinear", ["c1f", "s1", "z"], ["c1"]), N("DequantizeLinear", ["c1", "s1", "z"], ["d1"]),
             N("Resize", ["d1", "", "scales"], ["rf"], name="resize", mode=mode),
             N("QuantizeLinear", ["rf", "s1", "z"], ["r"]), N("DequantizeLinear", ["r", "s1", "z"], ["d2"]),
             N("DequantizeLinear", ["w2", "ws"], ["w2f"]), N("Conv", ["d2", "w2f"], ["c2f"], pads=[1, 1, 1, 1], name="conv2"),
             N("QuantizeLinear", ["c2f", "s2", "z"], ["y"])]
    outs = [helper.make_tensor_value_info(v, ONNX_OF[t], None) for v in ("y", "c1", "r")]
    graph = helper.make_graph(nodes, "qconv_resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 7])],
                              outs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": rng.standard_normal((2, 3, 9, 7)).astype(np.float32)}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("t", ["u8", "s8"])
@pytest.mark.parametrize("mode,step", [("nearest", "NhwcResize"), ("linear", "NhwcQResize")])
def test_between_quantized_convolutions_the_resize_reads_channels_last_bytes(t, mode, step, isa):
    model, feeds = _conv_resize_conv(t, seed=5, mode=mode)
    sess = session(model, fallback=False, isa=isa)
    ops = _ops(sess)
    assert ops.count("NhwcQConv") == 2 and step in ops and "DequantizeLinear" not in ops, ops
    assert placement(sess).rewrites["quantized_data_movement"] == 1, placement(sess).rewrites
    y, c1, r = sess.run(None, feeds)
    # The Resize exactly as ONNX Runtime runs it on OptimEP's own c1 between the Q/DQ pair.
    alone, _ = _model(t, list(c1.shape), scales=[1, 1, 2, 2], mode=mode, scale=0.1, zero=128 if t == "u8" else 0)
    np.testing.assert_array_equal(r, run_cpu(alone, {"x": c1})[0])
    # The NCHW form as the witness for the rest (the convolutions are within a step of ONNX Runtime's each,
    # test_qdq_units.py, which two layers can compound).
    nchw = session(model, fallback=False, isa=isa, channels_last="0")
    assert step[4:] in _ops(nchw) and step not in _ops(nchw), _ops(nchw)
    for got, want in zip((y, c1, r), nchw.run(None, feeds)):
        np.testing.assert_array_equal(got, want)
