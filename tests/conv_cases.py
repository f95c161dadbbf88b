"""Convolution geometries drawn by hypothesis, shared by the integer and float convolution tests: 1-D and
2-D, 1-2 groups, 1-5 input channels per group, output channels around the kernels' row tiles, kernels
of 1-3 per dim, strides 1-3, dilations 1-2, asymmetric pads 0-2, widths around the 8-pixel segments,
uint8/int8 inputs and (integer convolutions) outputs, weight zero points that keep int8 weights or not,
8- or 7-bit integer weights (7: AVX2's u8 x s8 pair kernels; with a zero point, past their bound at times),
Relu or not."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def conv_cases(draw):
    spatial = draw(st.sampled_from([1, 2, 2]))
    groups = draw(st.integers(1, 2))
    c = dict(
        spatial=spatial, n=draw(st.integers(1, 2)), groups=groups, cin_g=draw(st.integers(1, 5)),
        cout_g=draw(st.sampled_from([1, 3, 8, 9, 16, 17, 20, 32, 40])),
        kernel=[draw(st.integers(1, 3)) for _ in range(spatial)],
        strides=[draw(st.integers(1, 3)) for _ in range(spatial)],
        dilations=[draw(st.integers(1, 2)) for _ in range(spatial)],
        pads=[draw(st.integers(0, 2)) for _ in range(2 * spatial)],
        size=[draw(st.integers(1, 7))] * (spatial - 1) + [draw(st.sampled_from([1, 5, 8, 9, 16, 17, 23]))],
        x_type=draw(st.sampled_from(["u8", "s8"])), y_type=draw(st.sampled_from(["u8", "s8"])),
        w_zero=draw(st.sampled_from([0, 0, -3])), w_bits=draw(st.sampled_from([8, 7])), relu=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)))
    for d in range(spatial):  # at least one output pixel
        span = (c["kernel"][d] - 1) * c["dilations"][d] + 1
        if c["size"][d] + c["pads"][d] + c["pads"][d + spatial] < span:
            c["pads"][d + spatial] += span - (c["size"][d] + c["pads"][d] + c["pads"][d + spatial])
    return c


@st.composite
def depthwise_cases(draw):
    """Depthwise convolutions (one input and one output channel per group): channel counts around the
    kernels' 8- and 16-lane blocks, 3x3, 5x5 and 7x7 windows (their unrolled row paths) and others, rows
    wide enough for the eight- and four-pixel groups, strides, dilations and pads that put pixels on every edge."""
    spatial = draw(st.sampled_from([1, 2, 2, 2]))
    channels = draw(st.sampled_from([1, 3, 8, 16, 17, 33, 96]))
    k = draw(st.sampled_from([1, 2, 3, 3, 5, 5, 7]))
    c = dict(
        spatial=spatial, n=draw(st.integers(1, 2)), groups=channels, cin_g=1, cout_g=1,
        kernel=[k] * spatial, strides=[draw(st.sampled_from([1, 1, 2])) for _ in range(spatial)],
        dilations=[draw(st.sampled_from([1, 1, 2])) for _ in range(spatial)],
        pads=[draw(st.integers(0, k // 2 + 1)) for _ in range(2 * spatial)],
        size=[draw(st.integers(1, 9))] * (spatial - 1) + [draw(st.sampled_from([1, 4, 7, 12, 23]))],
        x_type=draw(st.sampled_from(["u8", "s8"])), y_type=draw(st.sampled_from(["u8", "s8"])), w_zero=0,
        relu=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)))
    for d in range(spatial):  # at least one output pixel
        span = (c["kernel"][d] - 1) * c["dilations"][d] + 1
        if c["size"][d] + c["pads"][d] + c["pads"][d + spatial] < span:
            c["pads"][d + spatial] += span - (c["size"][d] + c["pads"][d] + c["pads"][d + spatial])
    return c


def row_window_case(channels: int, k: int, **extra) -> dict:
    """A stride-1 k x k depthwise convolution over rows of 37 pixels: the kernels' unrolled row windows (3x3, 5x5,
    ConvNeXt's 7x7), channel tails included when channels is not a multiple of 8."""
    return dict(spatial=2, n=2, groups=channels, cin_g=1, cout_g=1, kernel=[k, k], strides=[1, 1], dilations=[1, 1],
                pads=[k // 2] * 4, size=[11, 37], relu=False, seed=channels * k, **extra)
