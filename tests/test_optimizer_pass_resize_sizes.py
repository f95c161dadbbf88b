"""constant_resize_scales (passes/resize_sizes.py): Resize sizes built at run time from the input's own dims -> constant scales."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
I64 = np.int64
PIECES = {"zero": np.array([0], I64), "two": np.array([2], I64)}


def _scales(m):
    resize = next(n for n in m.graph.node if n.op_type == "Resize")
    assert len(resize.input) == 3 and resize.input[1] == ""
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == resize.input[2]).tolist()


def _decoder(hw: tuple[int, int], mode: str = "linear", coords: str = "half_pixel", size_type: str = "float[batch, 8, 12, 10]"):
    return model(f"""g ({size_type} x) => (float[batch, 8, {hw[0]}, {hw[1]}] y) {{
        s = Shape(x)
        nc = Slice(s, zero, two)
        sizes = Concat <axis = 0> (nc, hw)
        y = Resize <mode = "{mode}", coordinate_transformation_mode = "{coords}"> (x, , , sizes)
    }}""", **PIECES, hw=np.array(hw, I64))


def test_segformer_decoder_upsampling_becomes_constant_scales_and_its_shape_nodes_die():
    m = _decoder((48, 40))
    out, ctx = apply("constant_resize_scales", m)
    assert ctx.rewrites["constant_resize_scales"] == 1 and _scales(out) == [1.0, 1.0, 4.0, 4.0]
    out, _ = apply("remove_dead_nodes", out)
    assert ops(out) == ["Resize"]
    assert_same_outputs(m, out, {"x": RNG.standard_normal((2, 8, 12, 10)).astype(np.float32)})


def test_fractional_ratios_whose_floor_gives_the_size_back_are_kept_exactly():
    # 12 -> 18 and 10 -> 25 (x1.5, x2.5), each mode and coordinate rule on the same float32 ratios.
    for mode, coords in (("linear", "half_pixel"), ("nearest", "asymmetric"), ("cubic", "align_corners")):
        m = _decoder((18, 25), mode, coords)
        out, ctx = apply("constant_resize_scales", m)
        assert ctx.rewrites["constant_resize_scales"] == 1 and _scales(out) == [1.0, 1.0, 1.5, 2.5]
        assert_same_outputs(m, out, {"x": RNG.standard_normal((1, 8, 12, 10)).astype(np.float32)})


def test_refuses_a_ratio_whose_product_falls_short_of_the_size():
    # float32(7) / float32(10) x 10 = 6.99999988 in double: floor gives 6, so only sizes say 7 for sure.
    m = _decoder((24, 7))
    out, ctx = apply("constant_resize_scales", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["size 3 (7) is not floor(10 x 0.699999988079071) in float32"]


def test_refuses_sizes_of_dims_shape_inference_cannot_see():
    m = _decoder((48, 40), size_type="float[batch, 8, h, w]")
    out, ctx = apply("constant_resize_scales", m)
    assert ops(out) == ops(m) and ctx.rewrites["constant_resize_scales"] == 0
    assert refusals(ctx) == ["size 2 (48) against the input's dim 2 (h)"]


def test_refuses_a_region_of_interest_crop():
    m = _decoder((48, 40), coords="tf_crop_and_resize")
    out, ctx = apply("constant_resize_scales", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["tf_crop_and_resize reads a region of interest"]
