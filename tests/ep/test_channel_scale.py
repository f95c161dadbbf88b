"""A squeeze-excite gate folded into the 1x1 convolution after it (rewrites/channel_scales.cc;
ops/conv_nhwc_algorithms.cc scales each image's packed weights by its gate on large images, the rows each task
multiplies on small ones): EfficientNet / MobileNetV3-style blocks match ONNX Runtime's CPU EP on every ISA, with
the gate per image or shared, on both paths."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(43)


def _se_block(n, c, size, cout, *, gate="Sigmoid", residual=False):
    """Depthwise -> GAP -> 1x1 reduce -> Relu -> 1x1 expand -> gate -> Mul -> 1x1 projection (+ residual)."""
    nodes = [N("Conv", ["x", "wd"], ["d"], group=c, pads=[1, 1, 1, 1], name="dw"),
             N("GlobalAveragePool", ["d"], ["g"], name="gap"), N("Conv", ["g", "wr", "br"], ["r"], name="reduce"),
             N("Relu", ["r"], ["r1"], name="relu"), N("Conv", ["r1", "we", "be"], ["e"], name="expand"),
             N(gate, ["e"], ["s"], name="gate"), N("Mul", ["d", "s"], ["m"], name="scale"),
             N("Conv", ["m", "wp", "bp"], ["p"], name="proj")]
    inits = {"wd": rand(RNG, c, 1, 3, 3), "wr": rand(RNG, 4, c, 1, 1) * 0.3, "br": rand(RNG, 4),
             "we": rand(RNG, c, 4, 1, 1) * 0.3, "be": rand(RNG, c), "wp": rand(RNG, cout, c, 1, 1) * 0.3, "bp": rand(RNG, cout)}
    if residual:
        nodes += [N("Conv", ["x", "wk"], ["k"], name="skip"), N("Add", ["p", "k"], ["y"], name="res")]
        inits["wk"] = rand(RNG, cout, c, 1, 1)
    else:
        nodes.append(N("Relu", ["p"], ["y"], name="out"))
    return make_model(nodes, {"x": (np.float32, [n, c, size, size])}, ["y"], inits), {"x": rand(RNG, n, c, size, size)}


def _steps(sess) -> list[str]:
    return [s for steps in placement(sess).compiled.values() for s in steps]


# Scaled weights where an image has at least 4 pixels per output channel, gated rows below that: 3x3 and 7x7
# images, and 7x7 with 576 channels (MobileNetV3's last blocks), whose images split into several tasks.
@pytest.mark.parametrize("n, c, size, cout, options", [
    (3, 16, 12, 8, dict()), (2, 24, 20, 40, dict(gate="HardSigmoid", residual=True)), (1, 33, 9, 17, dict()),
    (2, 16, 3, 8, dict()), (3, 40, 7, 24, dict(gate="HardSigmoid", residual=True)), (2, 576, 7, 96, dict()),
    (1, 19, 5, 33, dict(residual=True))])
def test_a_squeeze_excite_gate_runs_inside_the_projection(n, c, size, cout, options):
    model, feeds = _se_block(n, c, size, cout, **options)
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert any(s.startswith("Mul 'scale' + NhwcConv 'proj'") for s in _steps(sess)), _steps(sess)
        assert placement(sess).rewrites.get("channel_scales") == 1
        assert_close(sess.run(None, feeds)[0], ref, what=f"{isa} {n}x{c}x{size} -> {cout}")


def test_a_constant_per_channel_scale_folds_too():
    model = make_model([N("Mul", ["x", "s"], ["m"], name="scale"), N("Conv", ["m", "w"], ["c"], name="proj"),
                        N("Relu", ["c"], ["y"], name="relu")],
                       {"x": (np.float32, [2, 8, 10, 10])}, ["y"], {"s": rand(RNG, 1, 8, 1, 1), "w": rand(RNG, 4, 8, 1, 1)})
    feeds = {"x": rand(RNG, 2, 8, 10, 10)}
    sess = session(model, fallback=False)
    assert placement(sess).rewrites.get("channel_scales") == 1, _steps(sess)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])
