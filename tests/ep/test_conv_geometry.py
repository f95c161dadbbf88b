"""The direct float convolution over every geometry (the same drawn cases as the integer one: 1-D and
2-D, strides, dilations, asymmetric pads, groups, widths around the 8-pixel segments, channel counts
around the row tiles), bias and a fused Relu, on every ISA, within the float tolerances of ORT's CPU EP."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from onnx import helper

from conv_cases import conv_cases, depthwise_cases, row_window_case
from helpers import ISAS, assert_close, make_model, run_cpu
from optim.ep_plugin import session

N = helper.make_node


def _check_float_convolution(c):
    rng = np.random.default_rng(c["seed"])
    cin, cout = c["cin_g"] * c["groups"], c["cout_g"] * c["groups"]
    shape = [c["n"], cin, *c["size"]]
    inits = {"w": rng.standard_normal((cout, c["cin_g"], *c["kernel"])).astype(np.float32),
             "b": rng.standard_normal(cout).astype(np.float32)}
    nodes = [N("Conv", ["x", "w", "b"], ["cv"], strides=c["strides"], dilations=c["dilations"], pads=c["pads"],
               group=c["groups"], kernel_shape=c["kernel"])]
    nodes.append(N("Relu", ["cv"], ["y"]) if c["relu"] else N("Identity", ["cv"], ["y"]))
    model = make_model(nodes, {"x": (np.float32, shape)}, ["y"], inits)
    x = rng.standard_normal(shape).astype(np.float32)
    ref = run_cpu(model, {"x": x})[0]
    for isa in ISAS:
        got = session(model, fallback=False, isa=isa).run(None, {"x": x})[0]
        assert_close(got, ref, what=f"{isa} {c}")


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(conv_cases())
def test_float_convolution_matches_the_cpu_ep_on_every_isa(c):
    _check_float_convolution(c)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(depthwise_cases())
def test_float_depthwise_convolution_matches_the_cpu_ep_on_every_isa(c):
    _check_float_convolution(c)


@pytest.mark.parametrize("channels", [3, 17, 96])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_float_depthwise_windows_along_a_row_match_the_cpu_ep(channels, k):
    _check_float_convolution(row_window_case(channels, k))


# Inputs of 1 MiB and more take the row windows' prefetch of the next output row's input rows (dwconv_rows.h's
# kDwPrefetchBytes; smaller ones skip it): 72 channels of 64 x 60 floats, 3x3 at stride 1 and 2 and 5x5.
@pytest.mark.parametrize("k, stride", [(3, 1), (3, 2), (5, 1)])
def test_float_depthwise_over_a_large_input_matches_the_cpu_ep(k, stride):
    c = row_window_case(72, k)
    c.update(n=1, size=[64, 60], strides=[stride, stride])
    assert 72 * int(np.prod(c["size"])) * 4 >= 1 << 20  # float32 bytes of one image: past the prefetch bound
    _check_float_convolution(c)


def long_k_case(cin: int, cout: int, k: int, stride: int, size: int, relu: bool, seed: int) -> dict:
    """A dense convolution whose weights exceed the kernels' in-cache bound: the AVX-512 tile runs its K in blocks
    (whole taps when a tap's channels are fewer than a block, parts of one tap when more) over chunks of rows."""
    return dict(spatial=2, n=2, groups=1, cin_g=cin, cout_g=cout, kernel=[k, k], strides=[stride, stride],
                dilations=[1, 1], pads=[k // 2] * 4, size=[size, size], relu=relu, seed=seed)


# Panels of 170-300 KB (beyond the in-cache bound alone): 7x7 stride 2 with 64 channels a tap (four taps a block), 3x3
# stride 2 with 300 (a tap in two blocks, 256 + 44), a 1x1 of 4200 channels (17 blocks); 2 images of 10x10 outputs:
# rows past one 64-row chunk.
@pytest.mark.parametrize("cin, cout, k, stride, size", [(64, 72, 7, 2, 20), (300, 40, 3, 2, 20), (4200, 24, 1, 1, 10)])
def test_float_convolution_with_long_k_matches_the_cpu_ep(cin, cout, k, stride, size):
    _check_float_convolution(long_k_case(cin, cout, k, stride, size, relu=cout % 2 == 0, seed=cin + cout))
