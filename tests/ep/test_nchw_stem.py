"""The layout change at a partition's input folded into the stem convolution that alone reads it
(rewrites/nchw_stem.cc): a convolution of up to 4 input channels reads the image channels-first while it copies
its padded input, so the transposed image is never stored. Float (every ISA, against the CPU EP) and int8 (bytes
equal to the same model on the channels-first path, EP option channels_last=0, where the convolution sums the same
integers). An int8 stem also takes in the QuantizeLinear of a float image that only it reads, when it quantizes by
the stem's own scale and zero point: the same bytes as the QuantizeLinear kept apart, ties, saturation, infinities
and NaN included."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(7)


def _steps(sess) -> list[str]:
    return [s for ss in placement(sess).compiled.values() for s in ss]


def _float_stem(cin: int, kernel: int, stride: int, pad: int, size=(2, 33, 29)):
    n, h, w = size
    nodes = [N("Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4,
               name="stem"), N("Relu", ["c"], ["r"]), N("Conv", ["r", "w2"], ["y"], name="next")]
    inits = {"w": rand(RNG, 16, cin, kernel, kernel), "b": rand(RNG, 16), "w2": rand(RNG, 8, 16, 1, 1)}
    return make_model(nodes, {"x": (np.float32, [n, cin, h, w])}, ["y"], inits), {"x": rand(RNG, n, cin, h, w)}


FLOAT_STEMS = {
    "RGB 3x3 stride 2 (MobileNet)": dict(cin=3, kernel=3, stride=2, pad=1),
    "RGB 7x7 stride 2 (ResNet)": dict(cin=3, kernel=7, stride=2, pad=3),
    "4 channels 3x3 stride 2": dict(cin=4, kernel=3, stride=2, pad=1),
    "RGB 4x4 stride 4, no padding (ConvNeXt's patches)": dict(cin=3, kernel=4, stride=4, pad=0),
    "one channel 5x5": dict(cin=1, kernel=5, stride=1, pad=2),  # 3x3 stride 1 would be Winograd's, which keeps it apart
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(FLOAT_STEMS))
def test_a_float_stem_reads_the_channels_first_image(case, isa):
    model, feeds = _float_stem(**FLOAT_STEMS[case])
    sess = session(model, fallback=False, isa=isa)
    assert _steps(sess)[0].startswith("ToNhwc 'x/nhwc/ToNhwc' + NhwcConv 'stem'"), _steps(sess)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], what=f"{case} on {isa}")


# Rows wide enough that a float stem runs each image in several bands of output rows (ops/conv_nhwc_algorithms.cc:
# each task pads and interleaves the input rows of its band, 64 KB of them), the last band shorter than the others.
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", ["RGB 3x3 stride 2 (MobileNet)", "RGB 7x7 stride 2 (ResNet)",
                                  "RGB 4x4 stride 4, no padding (ConvNeXt's patches)"])
def test_a_float_stem_over_wide_images_runs_in_bands(case, isa):
    model, feeds = _float_stem(**FLOAT_STEMS[case], size=(2, 61, 700))
    sess = session(model, fallback=False, isa=isa)
    assert _steps(sess)[0].startswith("ToNhwc 'x/nhwc/ToNhwc' + NhwcConv 'stem'"), _steps(sess)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], what=f"{case} on {isa}, 61x700")


def test_a_convolution_of_five_channels_keeps_the_layout_change_apart():
    model, feeds = _float_stem(cin=5, kernel=3, stride=2, pad=1)
    sess = session(model, fallback=False)
    assert _steps(sess)[0] == "ToNhwc 'x/nhwc/ToNhwc'", _steps(sess)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


def _int8_stem(x_type: str, cin: int = 3, float_image: bool = False, q_scale: float | None = None,
               q_output: bool = False, kernel: int = 3):
    """x (uint8 / int8 image) -> QDQ Conv kernel x kernel stride 2 (cin -> 16) + Relu -> QDQ 1x1 Conv -> y.
    float_image: x is float32, quantized first (by q_scale, default the stem's own 1/32; q_output: its bytes are an
    output too). A 7x7 RGB stem (ResNet's) packs its kernel rows: 22 int16-pair or 24 quad values, not 28."""
    x_np = np.uint8 if x_type == "u8" else np.int8
    inits = {"xs": np.float32(1 / 32), "xz": np.array(100 if x_type == "u8" else -5, x_np),
             "w": RNG.integers(-127, 128, (16, cin, kernel, kernel)).astype(np.int8), "ws": RNG.uniform(0.002, 0.01, 16).astype(np.float32),
             "wz": np.zeros(16, np.int8), "b": RNG.standard_normal(16).astype(np.float32), "cs": np.float32(0.05),
             "cz": np.uint8(0), "w2": RNG.integers(-127, 128, (8, 16, 1, 1)).astype(np.int8), "w2s": np.float32(0.004),
             "ys": np.float32(0.1), "yz": np.uint8(128)}
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]), N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             N("Conv", ["xf", "wf", "b"], ["c"], strides=[2, 2], pads=[kernel // 2] * 4, name="stem"), N("Relu", ["c"], ["r"]),
             N("QuantizeLinear", ["r", "cs", "cz"], ["cq"]), N("DequantizeLinear", ["cq", "cs", "cz"], ["cd"]),
             N("DequantizeLinear", ["w2", "w2s"], ["w2f"]), N("Conv", ["cd", "w2f"], ["p"], name="next"),
             N("QuantizeLinear", ["p", "ys", "yz"], ["y"])]
    shape = [2, cin, 31, 26]
    x_proto = TensorProto.UINT8 if x_type == "u8" else TensorProto.INT8
    outputs = [helper.make_tensor_value_info("y", TensorProto.UINT8, None)]
    info = np.iinfo(x_np)
    feeds = {"x": RNG.integers(info.min, info.max + 1, shape).astype(x_np)}
    if float_image:
        inits["qs"] = np.float32(q_scale if q_scale is not None else 1 / 32)
        nodes.insert(0, N("QuantizeLinear", ["x", "qs", "xz"], ["xq"], name="quantize"))
        nodes[1].input[0] = "xq"
        if q_output:
            outputs.append(helper.make_tensor_value_info("xq", x_proto, None))
        # Steps of 1/64 (ties between two integers when divided by 1/32), beyond the type's range, and non-finite.
        x = RNG.integers(-12000, 12000, shape).astype(np.float32) / 64
        x.flat[::97], x.flat[1::101], x.flat[2::103] = np.inf, -np.inf, np.nan
        feeds = {"x": x}
    graph = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT if float_image else x_proto, shape)],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    return model, feeds


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("kernel", [3, 7])
@pytest.mark.parametrize("x_type", ["u8", "s8"])
def test_an_int8_stem_reads_the_channels_first_bytes_exactly(x_type, kernel, isa):
    model, feeds = _int8_stem(x_type, kernel=kernel)
    sess = session(model, fallback=False, isa=isa)
    assert any(s.startswith("ToNhwc 'x/nhwc/ToNhwc' + NhwcQConv 'stem'") for s in _steps(sess)), _steps(sess)
    nchw = session(model, fallback=False, isa=isa, channels_last="0")
    assert not any("ToNhwc" in s for s in _steps(nchw)), _steps(nchw)
    got = sess.run(None, feeds)[0]
    np.testing.assert_array_equal(got, nchw.run(None, feeds)[0], err_msg=f"{x_type} on {isa}")
    assert np.abs(got.astype(np.int32) - run_cpu(model, feeds)[0].astype(np.int32)).max() <= 2


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("x_type,cin,kernel", [("u8", 3, 3), ("s8", 3, 3), ("u8", 1, 3), ("s8", 4, 3), ("u8", 3, 7),
                                               ("s8", 3, 7)])
def test_an_int8_stem_quantizes_its_float_image_as_the_quantize_linear_it_takes_in(x_type, cin, kernel, isa):
    model, feeds = _int8_stem(x_type, cin, float_image=True, kernel=kernel)
    sess = session(model, fallback=False, isa=isa)
    assert any(s.startswith("QuantizeLinear 'quantize' + ToNhwc 'xq/nhwc/ToNhwc' + NhwcQConv 'stem'") for s in _steps(sess)), _steps(sess)
    apart = session(model, fallback=False, isa=isa, channels_last="0")  # the QuantizeLinear on its own, then the stem
    assert any(s == "QuantizeLinear 'quantize'" for s in _steps(apart)), _steps(apart)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], apart.run(None, feeds)[0], err_msg=f"{x_type}, {cin} channels on {isa}")


@pytest.mark.parametrize("case", ["its bytes are an output too", "it quantizes by another scale"])
def test_a_quantize_linear_the_stem_cannot_take_in_stays_apart(case):
    model, feeds = _int8_stem("u8", float_image=True, q_output=case.startswith("its bytes"),
                              q_scale=0.04 if case.endswith("scale") else None)
    sess = session(model, fallback=False)
    steps = _steps(sess)
    assert "QuantizeLinear 'quantize'" in steps and any(s.startswith("ToNhwc 'xq/nhwc/ToNhwc' + NhwcQConv 'stem'") for s in steps), steps
    ref = run_cpu(model, feeds)
    got = sess.run(None, feeds)
    if len(ref) > 1:
        np.testing.assert_array_equal(got[1], ref[1])  # the quantized image itself, as ONNX Runtime's
    assert np.abs(got[0].astype(np.int32) - ref[0].astype(np.int32)).max() <= 2
