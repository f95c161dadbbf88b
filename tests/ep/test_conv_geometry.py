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
