"""A float depthwise convolution folded into the 1x1 convolution that reads it (rewrites/depthwise_pointwise.cc,
ops/conv_dw_pw.cc), and where it pays the 1x1 expansion before it too: MobileNet-style blocks (expansion,
depthwise with its clamp or activation, projection with a residual or not) match ONNX Runtime's CPU EP on
every ISA, with tiles of output pixels that cross image boundaries, images of many tiles, and bands of rows
whose input rows overlap and reach into the padding; pairs that cannot fold stay apart, and the report says why."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(41)


def _block(n, c, expand, size, *, stride=1, kernel=3, act="Clip", residual=False, pw_bias=True, pw_kernel=1, pw_stride=1):
    ce = c * expand
    nodes = [N("Conv", ["x", "w1", "b1"], ["a"], name="expand"), N("Clip", ["a", "lo", "hi"], ["a6"], name="r1"),
             N("Conv", ["a6", "wd", "bd"], ["d"], group=ce, pads=[kernel // 2] * 4, strides=[stride] * 2, name="dw")]
    nodes.append(N(act, ["d", "lo", "hi"] if act == "Clip" else ["d"], ["d6"], name="act"))
    pw_inputs = ["d6", "w2", "b2"] if pw_bias else ["d6", "w2"]
    nodes.append(N("Conv", pw_inputs, ["p"], name="proj", pads=[pw_kernel // 2] * 4, strides=[pw_stride] * 2))
    out_size = (size + 2 * (kernel // 2) - kernel) // stride + 1
    inits = {"w1": rand(RNG, ce, c, 1, 1) * 0.3, "b1": rand(RNG, ce), "wd": rand(RNG, ce, 1, kernel, kernel) * 0.3,
             "bd": rand(RNG, ce), "w2": rand(RNG, c, ce, pw_kernel, pw_kernel) * 0.1, "b2": rand(RNG, c),
             "lo": np.float32(0), "hi": np.float32(6)}
    inputs = {"x": (np.float32, [n, c, size, size])}
    feeds = {"x": rand(RNG, n, c, size, size)}
    if residual:  # a residual computed inside the partition (the block's input through a 1x1), as in MobileNetV2
        nodes += [N("Conv", ["x", "wr"], ["skip"], name="skip"), N("Add", ["p", "skip"], ["y"], name="res")]
        inits["wr"] = rand(RNG, c, c, 1, 1) * 0.3
    else:
        nodes.append(N("Relu", ["p"], ["y"], name="relu"))
    return make_model(nodes, inputs, ["y"], inits), feeds


def _steps(sess) -> list[str]:
    return [s for steps in placement(sess).compiled.values() for s in steps]


@pytest.mark.parametrize("shape, options", [
    ((2, 16, 6, 17), dict(residual=True)),
    ((1, 24, 6, 56), dict(stride=2)),
    ((3, 8, 3, 9), dict(act="HardSwish", residual=True)),
    ((2, 40, 6, 14), dict(kernel=5, act="HardSwish", pw_bias=False)),
    ((1, 160, 6, 7), dict(act="Relu")),
    ((3, 16, 6, 33), dict(stride=2, act="HardSwish")),
    ((2, 24, 4, 15), dict(stride=2, kernel=5, pw_bias=False)),
    ((1, 40, 6, 9), dict(stride=2, act="Relu")),
    ((1, 16, 6, 28), dict(residual=True)),
    ((2, 8, 3, 30), dict(act="HardSwish", kernel=5)),
    ((1, 32, 6, 14), dict(stride=2, kernel=5, act="HardSwish")),  # MobileNetV3's 14x14 one at batch 1: apart
    ((1, 16, 6, 28), dict(stride=2, kernel=5, act="HardSwish")),  # folded at batch 1: two runs of bands sharing 3 rows
])
def test_a_depthwise_and_the_1x1_convolution_after_it_run_as_one_step(shape, options):
    model, feeds = _block(*shape, **options)
    ref = run_cpu(model, feeds)[0]
    # The expansion runs inside the same step (bands of rows) at 3x3 stride 2, and otherwise on images of 28x28
    # or more (each run of bands remakes the rows it shares: 2 at 3x3 stride 1, 3 at 5x5 stride 2); on smaller
    # ones on its own.
    with_expansion = (options.get("stride") == 2 and options.get("kernel", 3) == 3) or shape[3] * shape[3] >= 28 * 28
    first = "NhwcConv 'expand' + Clip 'r1' + NhwcConv 'dw' + " if with_expansion else "NhwcConv 'dw' + "
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        steps = _steps(sess)
        assert any(s.startswith(first) and " + NhwcConv 'proj'" in s for s in steps), steps
        assert placement(sess).rewrites.get("depthwise_pointwise") == 1
        assert_close(sess.run(None, feeds)[0], ref, what=f"{isa} {shape} {options}")


@pytest.mark.parametrize("options, why", [
    (dict(pw_kernel=3), "its reader NhwcConv 'proj' is not a 1x1 convolution of stride 1 without padding"),
    (dict(pw_stride=2), "its reader NhwcConv 'proj' is not a 1x1 convolution of stride 1 without padding"),
])
def test_a_depthwise_before_another_convolution_stays_apart_and_says_why(options, why):
    model, feeds = _block(1, 8, 3, 12, **options)
    sess = session(model, fallback=False)
    assert "depthwise_pointwise" not in placement(sess).rewrites
    assert f"depthwise_pointwise: NhwcConv 'dw': {why}" in placement(sess).rewrite_refusals, placement(sess).rewrite_refusals
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


def test_a_depthwise_output_read_twice_is_not_folded():
    model = make_model(
        [N("Conv", ["x", "wd"], ["d"], group=16, pads=[1, 1, 1, 1], name="dw"), N("Conv", ["d", "w2"], ["p"], name="proj"),
         N("GlobalAveragePool", ["d"], ["g"], name="gap")],
        {"x": (np.float32, [1, 16, 10, 10])}, ["p", "g"], {"wd": rand(RNG, 16, 1, 3, 3), "w2": rand(RNG, 8, 16, 1, 1)})
    sess = session(model, fallback=False)
    assert "depthwise_pointwise" not in placement(sess).rewrites
    feeds = {"x": rand(RNG, 1, 16, 10, 10)}
    for got, want in zip(sess.run(None, feeds), run_cpu(model, feeds)):
        assert_close(got, want)


@pytest.mark.parametrize("n, size, stride, folds", [(2, 28, 1, True), (3, 13, 2, True), (1, 14, 1, False)])
def test_a_depthwise_read_by_a_squeeze_excite_takes_its_expansion_itself(n, size, stride, folds):
    """Expansion -> depthwise (HardSwish) -> pool, gate and Mul -> projection: the depthwise's output is read
    twice, so it stays a step of its own, with the expansion folded into it where that pays, and then the
    global average pool too (summed from each band, a second output)."""
    c, ce = 8, 32
    nodes = [N("Conv", ["x", "w1", "b1"], ["a"], name="expand"), N("Clip", ["a", "lo", "hi"], ["a6"], name="r1"),
             N("Conv", ["a6", "wd", "bd"], ["d"], group=ce, pads=[1, 1, 1, 1], strides=[stride] * 2, name="dw"),
             N("HardSwish", ["d"], ["dh"], name="act"), N("GlobalAveragePool", ["dh"], ["g"], name="gap"),
             N("Conv", ["g", "wg"], ["gc"], name="gate_conv"), N("HardSigmoid", ["gc"], ["s"], name="gate"),
             N("Mul", ["dh", "s"], ["m"], name="scale"), N("Conv", ["m", "w2"], ["y"], name="proj")]
    inits = {"w1": rand(RNG, ce, c, 1, 1) * 0.3, "b1": rand(RNG, ce), "wd": rand(RNG, ce, 1, 3, 3) * 0.3, "bd": rand(RNG, ce),
             "wg": rand(RNG, ce, ce, 1, 1) * 0.2, "w2": rand(RNG, c, ce, 1, 1) * 0.2, "lo": np.float32(0), "hi": np.float32(6)}
    model = make_model(nodes, {"x": (np.float32, [n, c, size, size])}, ["y"], inits)
    feeds = {"x": rand(RNG, n, c, size, size)}
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        steps = _steps(sess)
        expected = ("NhwcConv 'expand' + Clip 'r1' + NhwcConv 'dw' + HardSwish 'act' + NhwcGlobalAveragePool 'gap'"
                    if folds else "NhwcConv 'dw' + HardSwish 'act'")
        assert expected in steps, steps
        assert_close(sess.run(None, feeds)[0], ref, what=f"{isa} {n}x{size} stride {stride}")
