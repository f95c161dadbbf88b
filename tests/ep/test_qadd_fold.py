"""A QDQ Add folded into the integer unit that makes one of its operands (rewrites/qadd_fold.cc, ops/qadd_after.h):
a convolution's residual connection, or a Linear layer's bias added after the MatMul's own quantization. The
folded step must give the same bytes as the same graph with the pair kept apart (the unit's output made a graph
output, which the fold leaves alone), on every ISA (int16-pair and VNNI kernels, dense, grouped and depthwise
convolutions), and the same as ONNX Runtime's CPU EP up to its own rounding of the unit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from helpers import ISAS, run_cpu, run_folded_and_apart, step_kernels
from qdq_models import unit_add_model
from optim.ep_plugin import placement, session

INT8_STEP_TOLERANCE = 1  # the CPU EP's QLinearConv / MatMul requantize in their own order: one step apart at most

CASES = {
    "conv residual": dict(unit="conv"),
    "conv residual, Relu after the Add": dict(unit="conv", relu=True),
    "conv residual, int8 operand": dict(unit="conv", other_type="s8"),
    "conv residual, int8 output, Relu after the Add": dict(unit="conv", out_type="s8", relu=True),
    "conv residual, int8 output and operand": dict(unit="conv", out_type="s8", other_type="s8"),
    # tiles of two column panels, the second pair part-filled (56 = 32 + 24), and of one panel (48 = 32 + 16)
    "conv residual, 56 channels": dict(unit="conv", cout=56),
    "conv residual, 48 channels, Relu after the Add": dict(unit="conv", cout=48, relu=True),
    "grouped conv residual": dict(unit="conv", group=2),  # 16 channels per group: channels last
    # 7-bit weights: AVX2's u8 x s8 kernels too (direct: Winograd, which takes AVX2's 3x3 convolutions, is off for
    # these, test_integer_winograd.py covers its QAdd); 40 = 16 + 16 + a part-filled panel
    "conv residual, 7-bit weights, 40 channels": dict(unit="conv", cout=40, w_top=64),
    "conv residual, 7-bit weights, int8 output and operand": dict(unit="conv", out_type="s8", other_type="s8", w_top=64),
    "depthwise conv residual": dict(unit="conv", group=32),
    "MatMul bias row": dict(unit="matmul"),
    "MatMul bias row, 7-bit weights": dict(unit="matmul", w_top=64),
    "MatMul bias row, Relu after the Add": dict(unit="matmul", relu=True),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_folded_add_gives_the_bytes_of_the_pair_kept_apart(case, isa):
    folded_model, feeds = unit_add_model(**CASES[case])
    apart_model, _ = unit_add_model(**CASES[case], keep_unit_output=True)
    options = {"winograd": "0"} if "7-bit" in case else {}
    got = run_folded_and_apart(folded_model, apart_model, feeds, isa, lambda s: "+ QAdd" in s, **options)
    ref = run_cpu(folded_model, feeds)[0]
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE + 1


def test_a_batch_of_five_images():
    # Rows of every image: the residual is indexed by output pixel across images.
    model, feeds = unit_add_model("conv", batch=5, seed=3)
    apart_model, _ = unit_add_model("conv", batch=5, seed=3, keep_unit_output=True)
    np.testing.assert_array_equal(session(model, fallback=False).run(None, feeds)[0],
                                  session(apart_model, fallback=False).run(None, feeds)[0])


def test_an_operand_that_broadcasts_keeps_the_add_apart():
    # A bias of two rows against [batch, 9, 24] outputs broadcasts along the rows: not a form the fold takes.
    import onnx
    m = onnx.load_from_string(unit_add_model("matmul")[0])
    other = next(t for t in m.graph.initializer if t.name == "other")
    other.CopyFrom(numpy_helper.from_array(np.tile(numpy_helper.to_array(other), (9, 1)), "other"))
    feeds = {"x": np.random.default_rng(1).integers(0, 256, (2, 9, 32)).astype(np.uint8)}
    sess = session(m.SerializeToString(), fallback=False)
    p = placement(sess)
    assert not any("+ QAdd" in s for ss in p.compiled.values() for s in ss)
    assert "qadd_fold: QAdd 'add': its other operand [9,24] has another rank than [2,9,24]" in p.rewrite_refusals, p.rewrite_refusals
    got = sess.run(None, feeds)[0]
    assert np.abs(got.astype(np.int32) - run_cpu(m.SerializeToString(), feeds)[0].astype(np.int32)).max() <= INT8_STEP_TOLERANCE + 1


def test_seven_bit_weights_fold_the_add_into_avx2s_u8s8_kernel():
    """The 7-bit cases above run on AVX2's u8 x s8 pair kernels when direct (8-bit ones on the int16 pairs)."""
    model, _ = unit_add_model(**CASES["conv residual, 7-bit weights, 40 channels"])
    assert "conv_gemm_u8s8_avx2_5x16" in step_kernels(model, "avx2", winograd="0")
    model, _ = unit_add_model(**CASES["conv residual"])
    assert "conv_gemm_u8s8_avx2_5x16" not in step_kernels(model, "avx2")
