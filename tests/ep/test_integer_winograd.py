"""Exact integer Winograd F(2x2, 3x3) on int16 pairs for QDQ 3x3 stride-1 convolutions on tables without VNNI's u8
x s8 quads (AVX2 with 8- or 7-bit weights, and the scalar table; rewrites/winograd.cc, ops/qconv_winograd.cc): drawn geometries
(input channels around the 16-lane input transform and K's pairs, output channels around the 8-lane output
transform and the 16-column panels, images smaller than a tile up to ragged last tile rows and columns, uint8 and
int8 inputs and outputs with zero points, weight zero points, a fused Relu) must give the bytes of the exact int64
replica on every ISA. A folded residual QAdd over blocks of tiles that cross images, channel ranges and chunks
gives the bytes of the Add kept apart and of the direct form (winograd=0). Weights whose sums could leave int32
stay direct and say why."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from helpers import ISAS, run_folded_and_apart
from qdq_models import qconv_unit_model, qconv_unit_replica, unit_add_model
from optim.ep_plugin import placement, session

PAIR_TABLES = ("scalar", "avx2")  # the tables without a VNNI u8 x s8 kernel: Winograd on int16 pairs for 8 and 7 bits
MIN_CHANNELS = 8  # rewrites/winograd.cc's kMinIntegerChannels


def _conv_step(sess) -> str:
    steps = [s for ss in placement(sess).compiled.values() for s in ss if "NhwcQConv" in s or "QLinearConv" in s]
    assert len(steps) == 1, steps
    return steps[0]


@st.composite
def cases(draw):
    c = dict(spatial=2, n=draw(st.integers(1, 2)), groups=1, cin_g=draw(st.sampled_from([3, 8, 9, 16, 17, 33, 64])),
             cout_g=draw(st.sampled_from([1, 8, 9, 16, 17, 33, 40])), kernel=[3, 3], strides=[1, 1], dilations=[1, 1],
             pads=[draw(st.integers(0, 2)) for _ in range(4)],
             size=[draw(st.integers(1, 9)), draw(st.sampled_from([1, 2, 5, 8, 9, 16, 23]))],
             x_type=draw(st.sampled_from(["u8", "s8"])), y_type=draw(st.sampled_from(["u8", "s8"])),
             w_zero=draw(st.sampled_from([0, 0, -3])), w_bits=draw(st.sampled_from([8, 8, 7])), relu=draw(st.booleans()),
             seed=draw(st.integers(0, 2**16)))
    for d in range(2):  # at least one output pixel
        short = 3 - (c["size"][d] + c["pads"][d] + c["pads"][d + 2])
        if short > 0:
            c["pads"][d + 2] += short
    return c


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cases())
def test_integer_winograd_equals_the_exact_replica_on_every_isa(c):
    model, x, p = qconv_unit_model(c)
    want = qconv_unit_replica(x, c, p)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        if isa in PAIR_TABLES:
            assert ("(winograd)" in _conv_step(sess)) == (c["cin_g"] >= MIN_CHANNELS), (isa, _conv_step(sess))
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want, err_msg=f"{isa} {c}")


@pytest.mark.parametrize("batch, cin, cout, hw, out_type, w_top", [
    (2, 32, 32, 56, "u8", 127),   # 784 tiles an image in blocks of 128: blocks start and end inside rows of 28 tiles, and one spans both images
    (3, 48, 96, 7, "s8", 127),    # one block of 16 tiles an image, cut into ranges of output channels
    (2, 192, 200, 13, "u8", 127),  # U' above 1 MB: the tiles in chunks; a part-filled last panel
    (2, 40, 40, 9, "s8", 64),     # 7-bit weights: direct, AVX2 runs them on its u8 x s8 pair kernel
])
def test_a_folded_residual_add_gives_the_bytes_of_the_add_apart_and_of_the_direct_form(batch, cin, cout, hw, out_type, w_top):
    kw = dict(unit="conv", relu=True, out_type=out_type, cout=cout, batch=batch, seed=cin, cin=cin, hw=hw, w_top=w_top)
    model, feeds = unit_add_model(**kw)
    apart, _ = unit_add_model(**kw, keep_unit_output=True)
    for isa in PAIR_TABLES:
        got = run_folded_and_apart(model, apart, feeds, isa, lambda s: "(winograd)" in s and "+ QAdd" in s)
        direct = session(model, fallback=False, isa=isa, winograd="0")
        assert not any("(winograd)" in s for ss in placement(direct).compiled.values() for s in ss)
        np.testing.assert_array_equal(got, direct.run(None, feeds)[0], err_msg=isa)


def test_weights_whose_sums_could_leave_int32_stay_direct_and_say_why():
    """600 input channels of weights all 127 (and the input's zero point near the middle): the transformed weights'
    sum per output channel times 4x the largest |x - zero point| passes 2^31, though the direct sums (9 taps) fit."""
    c = dict(spatial=2, n=1, groups=1, cin_g=600, cout_g=2, kernel=[3, 3], strides=[1, 1], dilations=[1, 1],
             pads=[1, 1, 1, 1], size=[4, 4], x_type="u8", y_type="u8", w_zero=0, w_bits=8, relu=False, seed=1)
    model, x, p = qconv_unit_model(c)
    m = onnx.load_from_string(model)
    w = next(t for t in m.graph.initializer if t.name == "w")
    p["w"] = np.full(numpy_helper.to_array(w).shape, 127, np.int8)
    w.CopyFrom(numpy_helper.from_array(p["w"], "w"))
    model = m.SerializeToString()
    for isa in PAIR_TABLES:
        sess = session(model, fallback=False, isa=isa)
        assert "(winograd)" not in _conv_step(sess)
        assert any(r.startswith("winograd: NhwcQConv") and "int32 sum out of range: stays direct" in r
                   for r in placement(sess).rewrite_refusals), placement(sess).rewrite_refusals
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], qconv_unit_replica(x, c, p), err_msg=isa)
