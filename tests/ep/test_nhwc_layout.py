"""The channels-last rewrite inside a partition (rewrites/channels_last.cc, conv_epilogues.cc): convolutions
run on NHWC tensors and so do the ops around them, so the layout changes only at the region's edges; the
results match ONNX Runtime's CPU EP on every ISA, with the NCHW form (channels_last=0) as a second witness.
Each test names the steps it expects, so a rewrite that stops firing (or fires wrongly) fails here."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, assert_close, make_model, rand, run_cpu, step_ops
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(77)


def _steps(sess) -> list[str]:
    compiled = placement(sess).compiled
    assert len(compiled) == 1, compiled
    return next(iter(compiled.values()))


def _ops(steps: list[str]) -> list[str]:
    return step_ops(steps)


def _check(model: bytes, feeds: dict, **options) -> list[str]:
    ref = run_cpu(model, feeds)
    steps = None
    for isa in ISAS:
        for layout in ("1", "0"):
            sess = session(model, fallback=False, isa=isa, channels_last=layout, **options)
            for got, want in zip(sess.run(None, feeds), ref):
                assert_close(got, want, what=f"{isa} channels_last={layout}")
            if layout == "1":
                steps = _steps(sess)
    return steps


def _resnet_block() -> bytes:
    """Conv-Relu-MaxPool, a residual block (Conv-Relu-Conv + identity, Relu), GAP, Flatten, Gemm."""
    return make_model(
        [N("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], name="c0"), N("Relu", ["c0"], ["r0"], name="r0"),
         N("MaxPool", ["r0"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool"),
         N("Conv", ["p", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="c1"), N("Relu", ["c1"], ["r1"], name="r1"),
         N("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="c2"), N("Add", ["c2", "p"], ["s"], name="add"),
         N("Relu", ["s"], ["r2"], name="r2"), N("GlobalAveragePool", ["r2"], ["g"], name="gap"),
         N("Flatten", ["g"], ["f"], name="flat"), N("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc")],
        {"x": (np.float32, [2, 3, 20, 20])}, ["y"],
        {"w0": rand(RNG, 16, 3, 3, 3), "b0": rand(RNG, 16), "w1": rand(RNG, 16, 16, 3, 3), "b1": rand(RNG, 16),
         "w2": rand(RNG, 16, 16, 3, 3), "b2": rand(RNG, 16), "wf": rand(RNG, 10, 16), "bf": rand(RNG, 10)})


def test_a_residual_network_changes_layout_only_at_its_edges():
    steps = _check(_resnet_block(), {"x": rand(RNG, 2, 3, 20, 20)})
    assert _ops(steps) == ["ToNhwc", "NhwcConv", "NhwcMaxPool", "NhwcConv", "NhwcConv", "NhwcGlobalAveragePool",
                           "ToNchw", "Flatten", "Gemm"], steps
    # The block's second conv absorbed the residual Add and the Relu after it.
    assert "NhwcConv 'c2' (winograd) + Add 'add' + Relu 'r2'" in steps and "NhwcConv 'c0' (winograd) + Relu 'r0'" in steps


def test_without_channels_last_the_convolutions_stay_nchw():
    sess = session(_resnet_block(), fallback=False, channels_last="0")
    assert not any(s.startswith(("Nhwc", "ToNhwc", "ToNchw")) for s in _steps(sess))


def test_squeeze_excite_concat_and_hardswish_stay_channels_last():
    """MobileNetV3-style: conv, x * HardSigmoid(x), squeeze-excite (ReduceMean over H, W; two 1x1 convs;
    HardSigmoid; Mul), a Concat of two branches on the channel axis, then a conv."""
    model = make_model(
        [N("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], name="c0"),
         N("HardSigmoid", ["c0"], ["hs"], alpha=1 / 6, beta=0.5, name="hs"), N("Mul", ["c0", "hs"], ["a"], name="swish"),
         N("ReduceMean", ["a", "axes"], ["m"], keepdims=1, name="mean"), N("Conv", ["m", "w1"], ["s1"], name="se1"),
         N("Relu", ["s1"], ["s2"], name="se_relu"), N("Conv", ["s2", "w2"], ["s3"], name="se2"),
         N("HardSigmoid", ["s3"], ["s4"], alpha=1 / 6, beta=0.5, name="gate"), N("Mul", ["a", "s4"], ["e"], name="excite"),
         N("Conv", ["x", "w3"], ["b"], pads=[1, 1, 1, 1], name="branch"), N("Concat", ["e", "b"], ["cat"], axis=1, name="cat"),
         N("Conv", ["cat", "w4"], ["y"], name="out")],
        {"x": (np.float32, [1, 4, 9, 11])}, ["y"],
        {"w0": rand(RNG, 8, 4, 3, 3), "axes": np.array([2, 3], np.int64), "w1": rand(RNG, 4, 8, 1, 1),
         "w2": rand(RNG, 8, 4, 1, 1), "w3": rand(RNG, 5, 4, 3, 3), "w4": rand(RNG, 6, 13, 1, 1)}, opset=18)
    steps = _check(model, {"x": rand(RNG, 1, 4, 9, 11)})
    assert _ops(steps).count("ToNhwc") == 1 and _ops(steps).count("ToNchw") == 1, steps
    assert "NhwcConv 'c0' (winograd) + HardSwish 'swish'" in steps, steps


def test_a_models_own_channels_last_transposes_cancel_out():
    """ConvNeXt-style: depthwise conv, Transpose to channels last, LayerNorm and a Linear over channels,
    Transpose back, then a conv: the two Transposes and the layout changes between them all vanish."""
    model = make_model(
        [N("Conv", ["x", "wd"], ["d"], group=8, pads=[1, 1, 1, 1], name="dw"),
         N("Transpose", ["d"], ["t"], perm=[0, 2, 3, 1], name="to_last"),
         N("LayerNormalization", ["t", "gamma", "beta"], ["ln"], axis=-1, name="ln"),
         N("MatMul", ["ln", "wl"], ["l"], name="linear"), N("Transpose", ["l"], ["u"], perm=[0, 3, 1, 2], name="to_first"),
         N("Conv", ["u", "wc"], ["y"], name="pw")],
        {"x": (np.float32, [2, 8, 6, 7])}, ["y"],
        {"wd": rand(RNG, 8, 1, 3, 3), "gamma": rand(RNG, 8), "beta": rand(RNG, 8), "wl": rand(RNG, 8, 12),
         "wc": rand(RNG, 5, 12, 1, 1)})
    steps = _check(model, {"x": rand(RNG, 2, 8, 6, 7)})
    assert _ops(steps) == ["ToNhwc", "NhwcConv", "LayerNormalization", "MatMul", "NhwcConv", "ToNchw"], steps


@pytest.mark.parametrize("shape", [[1, 16, 5, 5], [3, 16, 5, 5]])
def test_a_residual_that_broadcasts_is_added_after_the_convolution(shape):
    """Add(conv_a, conv_b) whose batch dims are both dynamic (and differ at run time): one conv absorbs the Add
    and the Relu; at run time its output or the residual broadcasts into the larger shape."""
    model = make_model(
        [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="c"), N("Conv", ["r", "w2"], ["rc"], name="rc"),
         N("Add", ["c", "rc"], ["s"], name="add"), N("Relu", ["s"], ["y"], name="relu")],
        {"x": (np.float32, ["n", 4, 5, 5]), "r": (np.float32, ["m", 16, 5, 5])}, ["y"],
        {"w": rand(RNG, 16, 4, 3, 3), "w2": rand(RNG, 16, 16, 1, 1)})
    feeds = {"x": rand(RNG, 3, 4, 5, 5), "r": rand(RNG, *shape)}
    steps = _check(model, feeds)
    assert sum(s.endswith(" + Add 'add' + Relu 'relu'") for s in steps) == 1, steps


def test_activations_after_a_convolution_run_in_its_epilogue():
    """SiLU (x * Sigmoid(x)), HardSwish, LeakyRelu and HardSigmoid right after convolutions (dense and
    depthwise) become part of the convolution's step."""
    model = make_model(
        [N("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], name="c0"), N("Sigmoid", ["c0"], ["s0"], name="sig"),
         N("Mul", ["c0", "s0"], ["a0"], name="silu"),
         N("Conv", ["a0", "w1"], ["c1"], name="c1"), N("HardSwish", ["c1"], ["a1"], name="hswish"),
         N("Conv", ["a1", "w2"], ["c2"], group=16, pads=[1, 1, 1, 1], name="dw"),
         N("LeakyRelu", ["c2"], ["a2"], alpha=0.2, name="leaky"),
         N("Conv", ["a2", "w3"], ["c3"], name="c3"), N("HardSigmoid", ["c3"], ["y"], alpha=0.3, beta=0.4, name="hsig")],
        {"x": (np.float32, [2, 3, 10, 9])}, ["y"],
        {"w0": rand(RNG, 8, 3, 3, 3), "w1": rand(RNG, 16, 8, 1, 1), "w2": rand(RNG, 16, 1, 3, 3),
         "w3": rand(RNG, 5, 16, 1, 1)}, opset=14)
    steps = _check(model, {"x": rand(RNG, 2, 3, 10, 9) * 3})
    # The depthwise convolution runs inside the 1x1 one that reads it (rewrites/depthwise_pointwise.cc).
    assert _ops(steps) == ["ToNhwc", "NhwcConv", "NhwcConv", "NhwcConv", "ToNchw"], steps
    for label in ("NhwcConv 'c0' (winograd) + Silu 'silu'", "NhwcConv 'c1' + HardSwish 'hswish'",
                  "NhwcConv 'dw' + LeakyRelu 'leaky' + NhwcConv 'c3' + HardSigmoid 'hsig'"):
        assert label in steps, (label, steps)


def test_resize_between_convolutions_stays_channels_last():
    """An FPN-style upsampling between convolutions runs on NHWC (NhwcResize), by scales and by sizes."""
    for resize in (N("Resize", ["c0", "", "scales"], ["u"], mode="linear", name="up"),
                   N("Resize", ["c0", "", "", "sizes"], ["u"], mode="nearest", name="up")):
        model = make_model(
            [N("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], name="c0"), resize,
             N("Conv", ["u", "w1"], ["y"], pads=[1, 1, 1, 1], name="c1")],
            {"x": (np.float32, [2, 3, 6, 5])}, ["y"],
            {"w0": rand(RNG, 8, 3, 3, 3), "w1": rand(RNG, 4, 8, 3, 3), "scales": np.array([1, 1, 2, 2], np.float32),
             "sizes": np.array([2, 8, 11, 9], np.int64)}, opset=19)
        steps = _check(model, {"x": rand(RNG, 2, 3, 6, 5)})
        assert _ops(steps) == ["ToNhwc", "NhwcConv", "NhwcResize", "NhwcConv", "ToNchw"], steps


def test_the_placement_names_each_rewrite_and_why_a_candidate_was_left_alone():
    """A grouped convolution with 4 channels per group stays NCHW, and the report says why."""
    model = make_model(
        [N("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], name="dense"), N("Relu", ["c0"], ["r0"], name="relu"),
         N("Conv", ["r0", "w1"], ["y"], group=4, pads=[1, 1, 1, 1], name="grouped")],
        {"x": (np.float32, [1, 3, 6, 6])}, ["y"], {"w0": rand(RNG, 16, 3, 3, 3), "w1": rand(RNG, 16, 4, 3, 3)})
    _check(model, {"x": rand(RNG, 1, 3, 6, 6)})
    p = placement(session(model, fallback=False))
    assert p.rewrites == {"channels_last": 1, "conv_epilogues": 1, "winograd": 1}, p.rewrites
    assert any(r.startswith("channels_last: Conv 'grouped': grouped with fewer than 16") for r in p.rewrite_refusals), p.rewrite_refusals


@pytest.mark.parametrize("channels", [3, 16, 17, 64, 70])
def test_pools_between_convolutions_fold_every_tap_on_every_isa(channels):
    """MaxPool (with NaN pixels: NaN wins, as in ONNX), AveragePool counting pads or not, and 3x3 windows
    that hang over the edges, on channel counts around the kernels' 8/16/32/64-lane blocks."""
    pools = [N("MaxPool", ["c0"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool"),
             N("AveragePool", ["c0"], ["p"], kernel_shape=[3, 3], strides=[1, 2], pads=[1, 0, 1, 1], name="pool"),
             N("AveragePool", ["c0"], ["p"], kernel_shape=[2, 3], pads=[1, 1, 0, 1], count_include_pad=1, name="pool")]
    for pool in pools:
        model = make_model(
            [N("Conv", ["x", "w0"], ["c0"], name="c0"), pool, N("Conv", ["p", "w1"], ["y"], name="c1")],
            {"x": (np.float32, [2, 4, 7, 9])}, ["y"], {"w0": rand(RNG, channels, 4, 1, 1), "w1": rand(RNG, 5, channels, 1, 1)})
        x = rand(RNG, 2, 4, 7, 9)
        steps = _check(model, {"x": x})
        assert _ops(steps) == ["ToNhwc", "NhwcConv", "Nhwc" + pool.op_type, "NhwcConv", "ToNchw"], steps
        # ONNX Runtime's MaxPool drops NaN; ONNX's lets it win, as OptimEP's NCHW pool does: the witness here.
        x[0, :, 3, 4] = np.nan  # one pixel: NaN in every channel after the 1x1 convolution
        for isa in ISAS:
            nchw = session(model, fallback=False, isa=isa, channels_last="0").run(None, {"x": x})[0]
            nhwc = session(model, fallback=False, isa=isa, channels_last="1").run(None, {"x": x})[0]
            assert np.isnan(nchw).any()
            assert_close(nhwc, nchw, what=f"{isa} NaN pixel")


@pytest.mark.parametrize("channels", [16, 64, 70])
def test_integer_max_pool_stays_channels_last(channels):
    """A QDQ Conv -> MaxPool -> QuantizeLinear chain: the pool runs on the uint8 NHWC tensor, within a
    quantization step of ONNX Runtime (the convolution's rounding; the pool itself is exact)."""
    inits = {"s": np.float32(0.05), "z": np.array(120, np.uint8),
             "w0": RNG.integers(-127, 128, (channels, 4, 1, 1)).astype(np.int8), "ws": np.float32(0.01),
             "ys": np.float32(0.2)}
    nodes = [N("DequantizeLinear", ["x", "s", "z"], ["xf"]), N("DequantizeLinear", ["w0", "ws"], ["w0f"]),
             N("Conv", ["xf", "w0f"], ["c0"], name="c0"), N("QuantizeLinear", ["c0", "ys", "z"], ["q0"]),
             N("DequantizeLinear", ["q0", "ys", "z"], ["d0"]),
             N("MaxPool", ["d0"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool"),
             N("QuantizeLinear", ["p", "ys", "z"], ["y"])]
    graph = helper.make_graph(nodes, "qpool", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 4, 9, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    feeds = {"x": RNG.integers(0, 256, (2, 4, 9, 8)).astype(np.uint8)}
    ref = run_cpu(model, feeds)[0].astype(np.int32)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert "NhwcMaxPool 'pool'" in _steps(sess), _steps(sess)
        assert np.abs(sess.run(None, feeds)[0].astype(np.int32) - ref).max() <= 1, isa


def test_a_decoder_concat_pulls_the_layout_change_onto_its_smaller_inputs():
    """Upsample(x1) ++ x2 -> Conv: the Concat and the Resize run channels last, and the layout changes on x1
    (before the upsampling, a quarter of the size) and x2, not on the concatenated tensor."""
    model = make_model(
        [N("Resize", ["x1", "", "scales"], ["u"], mode="linear", name="up"),
         N("Concat", ["u", "x2"], ["cat"], axis=1, name="cat"), N("Conv", ["cat", "w"], ["y"], name="fuse")],
        {"x1": (np.float32, [2, 6, 4, 5]), "x2": (np.float32, [2, 3, 8, 10])}, ["y"],
        {"scales": np.array([1, 1, 2, 2], np.float32), "w": rand(RNG, 4, 9, 1, 1)}, opset=19)
    steps = _check(model, {"x1": rand(RNG, 2, 6, 4, 5), "x2": rand(RNG, 2, 3, 8, 10)})
    assert sorted(_ops(steps)) == sorted(["ToNhwc", "ToNhwc", "NhwcResize", "Concat", "NhwcConv", "ToNchw"]), steps
    assert placement(session(model, fallback=False)).rewrites["channels_last"] == 1


def test_a_float_image_changes_layout_after_its_quantization():
    """Q(image) -> QDQ Conv: the layout change is not pulled above the QuantizeLinear onto the float image (4x
    the bytes) since nothing upstream of a partition input can cancel it; the uint8 tensor changes layout (and
    then the stem takes in both: it reads the float image channels-first and quantizes it, rewrites/nchw_stem.cc)."""
    inits = {"s": np.float32(0.03), "z": np.array(128, np.uint8), "ws": np.float32(0.01), "ys": np.float32(0.1),
             "w": RNG.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)}
    nodes = [N("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"), N("DequantizeLinear", ["xq", "s", "z"], ["xf"]),
             N("DequantizeLinear", ["w", "ws"], ["wf"]), N("Conv", ["xf", "wf"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             N("QuantizeLinear", ["c", "ys", "z"], ["y"])]
    graph = helper.make_graph(nodes, "qimage", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 12, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    feeds = {"x": rand(RNG, 2, 3, 12, 10)}
    ref = run_cpu(model, feeds)[0].astype(np.int32)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert _ops(_steps(sess))[:3] == ["QuantizeLinear", "ToNhwc", "NhwcQConv"], _steps(sess)
        assert np.abs(sess.run(None, feeds)[0].astype(np.int32) - ref).max() <= 1, isa


@pytest.mark.parametrize("pool", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("channels", [5, 300])
def test_global_pools_after_a_convolution_sum_chunks_of_pixels(pool, channels):
    """Conv -> global pool over 23 x 13 pixels (several 64-pixel chunks) and channels past a 256-channel block:
    channels last, equal to the CPU EP within the float tolerance. A NaN pixel reaches its image's outputs, as in
    the NCHW form (the witness: ORT's GlobalMaxPool drops NaN where ONNX's definition keeps it)."""
    model = make_model([N("Conv", ["x", "w"], ["c"], name="conv"), N(pool, ["c"], ["y"], name="pool")],
                       {"x": (np.float32, [2, 4, 23, 13])}, ["y"], {"w": rand(RNG, channels, 4, 1, 1)})
    x = rand(RNG, 2, 4, 23, 13)
    steps = _check(model, {"x": x})
    assert _ops(steps)[:3] == ["ToNhwc", "NhwcConv", f"Nhwc{pool}"], steps
    x[1, :, 17, 5] = np.nan
    for isa in ISAS:
        nchw = session(model, fallback=False, isa=isa, channels_last="0").run(None, {"x": x})[0]
        nhwc = session(model, fallback=False, isa=isa, channels_last="1").run(None, {"x": x})[0]
        assert np.isnan(nhwc[1]).all() and not np.isnan(nhwc[0]).any(), isa
        assert_close(nhwc, nchw, what=f"{isa} NaN pixel")


def test_an_average_pool_window_far_larger_than_its_input_stays_cheap_and_exact():
    """EfficientNet's head as transformers exports it: AveragePool(kernel 1280, stride 1280, ceil_mode) over a 7 x 7
    map is a global mean; only the taps inside the input are listed (not 1280 x 1280 of them per pixel)."""
    model = make_model([N("Conv", ["x", "w"], ["c"], name="conv"),
                        N("AveragePool", ["c"], ["y"], kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1, name="pool")],
                       {"x": (np.float32, [2, 3, 7, 7])}, ["y"], {"w": rand(RNG, 40, 3, 1, 1)})
    steps = _check(model, {"x": rand(RNG, 2, 3, 7, 7)})
    assert _ops(steps)[:3] == ["ToNhwc", "NhwcConv", "NhwcAveragePool"], steps


@pytest.mark.parametrize("residual_read_later", [False, True])
def test_a_residual_that_dies_at_its_convolution_gives_the_output_its_buffer(residual_read_later):
    """conv(x) + r with r the output of an earlier convolution: where r is read last there, the plan gives the sum
    r's buffer (the epilogue reads each element before writing it); where a later node still reads r, not."""
    nodes = [N("Conv", ["x", "w0"], ["r0"], name="c0"), N("Relu", ["r0"], ["r"], name="relu"),
             N("Conv", ["r", "w1"], ["c1"], pads=[1, 1, 1, 1], name="c1"), N("Relu", ["c1"], ["h"], name="relu1"),
             N("Conv", ["h", "w2"], ["c2"], name="c2"), N("Add", ["c2", "r"], ["y"], name="add")]
    outputs = ["y"]
    if residual_read_later:
        nodes.append(N("Conv", ["r", "w3"], ["z"], name="c3"))
        nodes.append(N("Add", ["y", "z"], ["y2"], name="add2"))
        outputs = ["y2"]
    model = make_model(nodes, {"x": (np.float32, [2, 8, 9, 11])}, outputs,
                       {"w0": rand(RNG, 24, 8, 1, 1), "w1": rand(RNG, 16, 24, 3, 3), "w2": rand(RNG, 24, 16, 1, 1),
                        "w3": rand(RNG, 24, 24, 1, 1)} if residual_read_later else
                       {"w0": rand(RNG, 24, 8, 1, 1), "w1": rand(RNG, 16, 24, 3, 3), "w2": rand(RNG, 24, 16, 1, 1)})
    steps = _check(model, {"x": rand(RNG, 2, 8, 9, 11)})
    assert "NhwcConv 'c2' + Add 'add'" in steps, steps


@pytest.mark.parametrize("kernel, group, algorithm", [(3, 1, " (winograd)"), (1, 1, ""), (3, 48, "")])
def test_a_convolution_whose_residual_is_its_own_input_does_not_overwrite_it(kernel, group, algorithm):
    """y = conv(x) + x with x computed in the partition and read last there: x is the convolution's image as
    well as its residual, so the output cannot take x's buffer (tiles and channel panels read pixels that
    others have written by then): Winograd, a 1x1 split into panels and a depthwise window alike."""
    model = make_model([N("Conv", ["a", "w0"], ["x0"], name="c0"), N("Relu", ["x0"], ["x"], name="relu"),
                        N("Conv", ["x", "w"], ["c"], pads=[kernel // 2] * 4, group=group, name="conv"),
                        N("Add", ["c", "x"], ["y"], name="add")],
                       {"a": (np.float32, [2, 16, 20, 20])}, ["y"],
                       {"w0": rand(RNG, 48, 16, 1, 1), "w": rand(RNG, 48, 48 // group, kernel, kernel)})
    steps = _check(model, {"a": rand(RNG, 2, 16, 20, 20)})
    assert f"NhwcConv 'conv'{algorithm} + Add 'add'" in steps, steps
