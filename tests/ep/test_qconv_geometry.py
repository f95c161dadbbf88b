"""The direct integer convolution over every geometry it claims: 1-D and 2-D, strides, dilations,
asymmetric padding, rectangular kernels, groups, widths around the kernel's 8-pixel segments, output
channel counts around its 8-, 16- and 32-wide tiles, uint8/int8 inputs and outputs, and weight zero points that keep the
weights in int8 (the VNNI form) or not (the int16-pair form). On every ISA the unit must equal an exact
int64 replica bit for bit, and stay within a quantization step of ORT's float QDQ reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from onnx import helper

from conv_cases import conv_cases, depthwise_cases, row_window_case
from helpers import ISAS, run_cpu
from qdq_models import qconv_unit_model, qconv_unit_replica
from optim.ep_plugin import placement, session

INT8_STEP_TOLERANCE = 1  # quantization steps between OptimEP and the float QDQ reference
N = helper.make_node


def _check_integer_convolution(c):
    model, x, p = qconv_unit_model(c)
    want = qconv_unit_replica(x, c, p)
    ref = run_cpu(model, {"x": x})[0]
    assert np.abs(want.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert placement(sess).integer_units == 1, (isa, c)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want, err_msg=f"{isa} {c}")


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(conv_cases())
def test_integer_convolution_equals_the_exact_replica_on_every_isa(c):
    _check_integer_convolution(c)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(depthwise_cases())
def test_integer_depthwise_convolution_equals_the_exact_replica_on_every_isa(c):
    _check_integer_convolution(c)


@pytest.mark.parametrize("channels", [3, 17, 96])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_integer_depthwise_windows_along_a_row_equal_the_exact_replica(channels, k):
    _check_integer_convolution(row_window_case(channels, k, x_type="u8", y_type="u8", w_zero=0))


@pytest.mark.parametrize("channels", [3, 17, 96])
@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("x_type", ["u8", "s8"])
def test_strided_integer_depthwise_reads_the_bytes_exactly(channels, k, x_type):
    """Stride 2 both ways: the kernels convert the input bytes as they read them (no float copy), channel tails
    included (3 and 17 channels end inside a vector), rows wide enough for the eight-pixel windows."""
    _check_integer_convolution(dict(
        spatial=2, n=2, groups=channels, cin_g=1, cout_g=1, kernel=[k, k], strides=[2, 2], dilations=[1, 1],
        pads=[k // 2] * 4, size=[9, 37], x_type=x_type, y_type="u8", w_zero=0, relu=False, seed=channels * k))
