"""Winograd F(2x2, 3x3) for float 3x3 stride-1 convolutions (rewrites/winograd.cc, ops/conv_winograd.cc):
drawn geometries (channel counts around the 8- and 16-lane blocks and the 16-column GEMM panels, images
smaller than a tile up to several blocks of tiles, asymmetric pads that leave a ragged last tile row or
column), bias, a folded residual and every epilogue activation, on every ISA, within the float tolerances
of ORT's CPU EP; the direct kernels (winograd=0) as a second witness. The step labels show which ran."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node


@st.composite
def winograd_cases(draw):
    c = dict(n=draw(st.integers(1, 2)), cin=draw(st.sampled_from([1, 3, 8, 16, 17, 33, 64])),
             cout=draw(st.sampled_from([1, 8, 16, 17, 33, 40, 70])), h=draw(st.integers(1, 9)),
             w=draw(st.sampled_from([1, 2, 5, 8, 9, 16, 23])), pads=[draw(st.integers(0, 2)) for _ in range(4)],
             residual=draw(st.booleans()), act=draw(st.sampled_from(["", "Relu", "Clip", "Silu", "HardSwish"])),
             seed=draw(st.integers(0, 2**16)))
    for d, size in ((0, "h"), (1, "w")):  # at least one output pixel
        short = 3 - (c[size] + c["pads"][d] + c["pads"][d + 2])
        if short > 0:
            c["pads"][d + 2] += short
    return c


def _model(c) -> tuple[bytes, dict]:
    rng = np.random.default_rng(c["seed"])
    oh, ow = c["h"] + c["pads"][0] + c["pads"][2] - 2, c["w"] + c["pads"][1] + c["pads"][3] - 2
    inits = {"w": rand(rng, c["cout"], c["cin"], 3, 3), "b": rand(rng, c["cout"]),
             "lo": np.float32(-1.0), "hi": np.float32(2.0)}
    inputs = {"x": (np.float32, [c["n"], c["cin"], c["h"], c["w"]])}
    feeds = {"x": rand(rng, c["n"], c["cin"], c["h"], c["w"])}
    nodes = [N("Conv", ["x", "w", "b"], ["cv"], pads=c["pads"], name="conv")]
    last = "cv"
    if c["residual"]:
        inputs["r"] = (np.float32, [c["n"], c["cout"], oh, ow])
        feeds["r"] = rand(rng, c["n"], c["cout"], oh, ow)
        nodes.append(N("Add", ["cv", "r"], ["sum"]))
        last = "sum"
    act = c["act"]
    if act == "Silu":
        nodes += [N("Sigmoid", [last], ["sg"]), N("Mul", [last, "sg"], ["y"])]
    elif act == "Clip":
        nodes.append(N("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(N(act or "Identity", [last], ["y"]))
    return make_model(nodes, inputs, ["y"], inits), feeds


def _conv_step(sess) -> str:
    steps = [s for steps in placement(sess).compiled.values() for s in steps if s.startswith("Conv ") or "NhwcConv '" in s]
    assert len(steps) == 1, steps
    return steps[0]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(winograd_cases())
def test_winograd_matches_the_cpu_ep_and_the_direct_kernels_on_every_isa(c):
    _check_against_cpu_and_direct(c)


def _check_against_cpu_and_direct(c):
    model, feeds = _model(c)
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        fast = session(model, fallback=False, isa=isa)
        assert "NhwcConv 'conv' (winograd)" in _conv_step(fast)
        got = fast.run(None, feeds)[0]
        assert_close(got, ref, what=f"{isa} {c}")
        direct = session(model, fallback=False, isa=isa, winograd="0")
        assert "(winograd)" not in _conv_step(direct)
        assert_close(got, direct.run(None, feeds)[0], what=f"{isa} winograd vs direct {c}")


def test_winograd_shares_out_many_blocks_and_channel_ranges_alike():
    """56x56 images give several blocks of tiles per image (the threads share blocks); a 7x7 image with 96
    output channels one block cut into ranges of output channels."""
    rng = np.random.default_rng(5)
    for n, cin, cout, size in ((2, 64, 64, 56), (3, 48, 96, 7)):
        model = make_model([N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv")],
                           {"x": (np.float32, [n, cin, size, size])}, ["y"],
                           {"w": rand(rng, cout, cin, 3, 3), "b": rand(rng, cout)})
        x = rand(rng, n, cin, size, size)
        ref = run_cpu(model, {"x": x})[0]
        for isa in ISAS:
            assert_close(session(model, fallback=False, isa=isa).run(None, {"x": x})[0], ref, what=f"{isa} {n}x{cin}x{size}")


@pytest.mark.parametrize("n, cin, cout, h, w, pads, act", [
    (2, 160, 120, 31, 32, [1, 1, 1, 0], "Relu"),  # 512 tiles: two chunks (468 + 44), ragged transform blocks
    (1, 129, 130, 7, 7, [1, 1, 1, 1], "Silu"),    # one chunk of 16 tiles, odd channels, a cut last panel
])
def test_wide_convolutions_run_in_chunks_of_tiles_alike(n, cin, cout, h, w, pads, act):
    """U above 1 MB (Cin x Cout > 16384): the tiles go in chunks (V and M of a chunk within 8 MB), each step
    over the whole chunk; a folded residual and an activation ride the output transform as in fused blocks."""
    _check_against_cpu_and_direct(dict(n=n, cin=cin, cout=cout, h=h, w=w, pads=pads, residual=True, act=act, seed=cin))


@pytest.mark.parametrize("geometry, why", [
    (dict(strides=[2, 2]), "stride 2"), (dict(dilations=[2, 2]), "dilation 2"), (dict(group=2), "two groups")])
def test_other_3x3_convolutions_stay_direct(geometry, why):
    rng = np.random.default_rng(6)
    cin_g = 8 // geometry.get("group", 1)
    model = make_model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv", **geometry)],
                       {"x": (np.float32, [1, 8, 12, 12])}, ["y"], {"w": rand(rng, 8, cin_g, 3, 3)})
    sess = session(model, fallback=False)
    assert "(winograd)" not in _conv_step(sess), why
    assert "winograd" not in placement(sess).rewrites


def test_convolutions_wider_than_1024_channels_stay_direct_and_say_why():
    rng = np.random.default_rng(7)
    model = make_model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="wide")],
                       {"x": (np.float32, [1, 1100, 4, 4])}, ["y"], {"w": rand(rng, 2, 1100, 3, 3)})
    sess = session(model, fallback=False)
    assert "(winograd)" not in _conv_step(sess)
    assert any(r.startswith("winograd: NhwcConv 'wide': 1100 input and 2 output channels: more than 1024 stay direct")
               for r in placement(sess).rewrite_refusals), placement(sess).rewrite_refusals


def test_the_placement_report_counts_winograd_convolutions_unless_the_option_turns_it_off():
    model, _ = _model(dict(n=1, cin=4, cout=4, h=6, w=6, pads=[1, 1, 1, 1], residual=False, act="", seed=1))
    assert placement(session(model, fallback=False)).rewrites.get("winograd") == 1
    assert "winograd" not in placement(session(model, fallback=False, winograd="0")).rewrites
