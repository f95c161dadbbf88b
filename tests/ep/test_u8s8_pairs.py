"""AVX2's u8 x s8 kernels sum each pair of products in int16 (vpmaddubsw), so they are exact only for weights
whose pairs stay inside int16 for every uint8 input: positive weights of a pair summing to at most 128, negative
ones to at least -128 (kernel_table.h, u8s8_pairs_exact); 7-bit weights (`optim quantize --weight-bits 7`)
always pass. At the bound, with every input at its largest (255 x 128 = 32640), the integer units must equal
the exact replica; one pair past it must send the unit to the int16-pair kernel, exact too. The step profile
names the kernel each unit chose, which is what these tests read to know which path ran. The convolutions run
direct (EP option winograd=0: AVX2's 3x3 ones would otherwise run Winograd on int16 pairs, whose own tests are
test_integer_winograd.py)."""

from __future__ import annotations

import numpy as np
import pytest

import onnx
from onnx import numpy_helper

from helpers import ISAS, run_optim, step_kernels
from qdq_models import qconv_unit_model, qconv_unit_replica, qgemm_unit_model, qgemm_unit_replica

# Weight pairs at the bound: same-sign pairs summing to +-128, opposite signs at full range (these never
# saturate), and one weight alone at each end.
AT_THE_BOUND = [(64, 64), (-64, -64), (127, 1), (1, 127), (-128, 0), (0, -128), (127, -127), (-128, 127), (100, 28)]
PAST_THE_BOUND = (127, 2)  # 129 * 255 = 32895 > 32767
AVX2_KERNELS = {"conv": ("conv_gemm_u8s8_avx2_5x16", "conv_gemm_s16_avx2_6x16"),
                "gemm": ("qgemm_u8s8_avx2_5x16", "qgemm_s16_avx2_4x16")}


def _bounded_weights(cout: int, taps: int, k: int, past: bool, seed: int) -> np.ndarray:
    """[cout, taps, k] int8 weights whose pairs along k (k padded to even within each tap, as the kernels pair an
    input's channels) all sit at the bound; with `past`, one pair beyond."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(AT_THE_BOUND), size=(cout, taps, (k + 1) // 2))
    w = np.array(AT_THE_BOUND, np.int64)[picks].reshape(cout, taps, -1)[:, :, :k].copy()
    if past:
        w[cout // 2, 0, :2] = PAST_THE_BOUND
    return w.astype(np.int8)


def _conv_case(kernel: int, cin: int, x_type: str, past: bool):
    c = dict(spatial=2, n=2, groups=1, cin_g=cin, cout_g=24, kernel=[kernel, kernel], strides=[1, 1], dilations=[1, 1],
             pads=[kernel // 2] * 4, size=[5, 11], x_type=x_type, y_type="u8", w_zero=0, relu=False, seed=cin)
    model, x, p = qconv_unit_model(c)
    m = onnx.load_from_string(model)
    # Channels-last B pairs channels within each tap: move the pairs onto the channel axis.
    w = _bounded_weights(24, kernel * kernel, cin, past, seed=cin).reshape(24, kernel, kernel, cin).transpose(0, 3, 1, 2).copy()
    for init in m.graph.initializer:
        if init.name == "w":
            init.CopyFrom(numpy_helper.from_array(w, "w"))
    p = dict(p, w=w)
    return m.SerializeToString(), x, lambda xs: qconv_unit_replica(xs, c, p)


def _gemm_case(k: int, x_type: str, past: bool):
    model, x, p = qgemm_unit_model(7, k, 40, x_type=x_type, y_type="u8", gemm=True, trans_b=True, bias=True, relu=False,
                             per_channel=True, seed=k)
    m = onnx.load_from_string(model)
    w = _bounded_weights(40, 1, k, past, seed=k)[:, 0]  # [N, K]: transB
    for init in m.graph.initializer:
        if init.name == "w":
            init.CopyFrom(numpy_helper.from_array(w, "w"))
    p = dict(p, w=w)
    return m.SerializeToString(), x, lambda xs: qgemm_unit_replica(xs, p)


def _largest_inputs(x: np.ndarray) -> np.ndarray:
    """Every input at the value the u8 x s8 kernels see as 255 (int8 inputs are flipped by +128)."""
    return np.full_like(x, np.iinfo(x.dtype).max)


CASES = {
    "conv1x1_u8": lambda past: _conv_case(1, 64, "u8", past),
    "conv3x3_u8_odd_channels": lambda past: _conv_case(3, 7, "u8", past),
    "conv3x3_s8": lambda past: _conv_case(3, 16, "s8", past),
    "gemm_u8": lambda past: _gemm_case(96, "u8", past),
    "gemm_s8_odd_k": lambda past: _gemm_case(37, "s8", past),
}


@pytest.mark.parametrize("past", [False, True], ids=["at_the_bound", "one_pair_past"])
@pytest.mark.parametrize("cid", sorted(CASES))
def test_pairs_at_the_bound_run_on_the_u8s8_kernel_and_past_it_on_int16_pairs_exactly_on_every_isa(cid, past):
    model, x, replica = CASES[cid](past)
    u8s8, s16 = AVX2_KERNELS["gemm" if cid.startswith("gemm") else "conv"]
    assert step_kernels(model, "avx2", winograd="0") == [s16 if past else u8s8]
    for feeds in (x, _largest_inputs(x)):
        want = replica(feeds)
        for isa in ISAS:
            np.testing.assert_array_equal(run_optim(model, {"x": feeds}, isa=isa, winograd="0")[0], want, err_msg=f"{cid} {isa}")


def test_eight_bit_weights_take_the_u8s8_kernels_only_where_they_sum_quads_exactly():
    """Full-range int8 weights: int16 pairs on AVX2, VNNI quads (vpdpbusd never saturates) where the CPU has them."""
    model, _, _ = qgemm_unit_model(7, 64, 40, x_type="u8", y_type="u8", gemm=True, trans_b=True, bias=True, relu=False,
                             per_channel=True, seed=1)
    assert step_kernels(model, "avx2") == ["qgemm_s16_avx2_4x16"]
    for isa in ISAS:
        if isa in ("avxvnni", "avx512vnni", "amx"):
            assert "u8s8" in step_kernels(model, isa)[0], isa
