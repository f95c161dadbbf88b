"""A QDQ Add folded into the integer unit that makes one of its operands (rewrites/qadd_fold.cc, ops/qadd_after.h):
a convolution's residual connection, or a Linear layer's bias added after the MatMul's own quantization. The
folded step must give the same bytes as the same graph with the pair kept apart (the unit's output made a graph
output, which the fold leaves alone), on every ISA (int16-pair and VNNI kernels, dense, grouped and depthwise
convolutions), and the same as ONNX Runtime's CPU EP up to its own rounding of the unit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, run_folded_and_apart, step_kernels
from optim.ep_plugin import placement, session

N = helper.make_node
INT8_STEP_TOLERANCE = 1  # the CPU EP's QLinearConv / MatMul requantize in their own order: one step apart at most


def _model(unit: str, *, group: int = 1, relu: bool = False, other_type: str = "u8", out_type: str = "u8",
           cout: int = 32, keep_unit_output: bool = False, batch: int = 2, seed: int = 0, w_top: int = 127):
    """x (u8) -> DQ -> unit (Conv, or MatMul over [batch, 9, 32]) -> Q -> DQ -> Add(DQ(other)) [-> Relu] -> Q -> y.
    Conv: other is a residual of the output's shape, from a 1x1 QDQ convolution of x (a ResNet's downsampling
    branch: channels last like the unit); MatMul: a quantized bias row (a constant). out_type: the unit's
    quantized output and y (the fold needs them alike). w_top: the unit's weights lie in [-w_top, w_top] (64: 7-bit
    weights, which AVX2 runs on its u8 x s8 pair kernels)."""
    rng = np.random.default_rng(seed)
    o_np = np.uint8 if other_type == "u8" else np.int8
    y_np, y_proto = (np.uint8, TensorProto.UINT8) if out_type == "u8" else (np.int8, TensorProto.INT8)
    if unit == "conv":
        cin, hw = 32, 9
        x_shape, y_shape = [batch, cin, hw, hw], [batch, cout, hw, hw]
        w = rng.integers(-w_top, w_top + 1, (cout, cin // group, 3, 3)).astype(np.int8)
        w_scale = rng.uniform(0.002, 0.01, cout).astype(np.float32)
        inits = {"w": w, "ws": w_scale, "wz": np.zeros(cout, np.int8), "b": rng.standard_normal(cout).astype(np.float32),
                 "w1": rng.integers(-127, 128, (cout, cin, 1, 1)).astype(np.int8), "w1s": np.float32(0.003)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
              N("Conv", ["xf", "wf", "b"], ["u"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group, name="unit"),
              N("DequantizeLinear", ["w1", "w1s"], ["w1f"]), N("Conv", ["xf", "w1f"], ["r1"], name="branch"),
              N("QuantizeLinear", ["r1", "os", "oz"], ["other"])]
    else:
        k, n = 32, 24
        x_shape, y_shape = [batch, 9, k], [batch, 9, n]
        inits = {"w": rng.integers(-w_top, w_top + 1, (k, n)).astype(np.int8), "ws": np.float32(0.004), "wz": np.int8(0),
                 "other": rng.integers(np.iinfo(o_np).min, np.iinfo(o_np).max + 1, n).astype(o_np)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"]), N("MatMul", ["xf", "wf"], ["u"], name="unit")]
    inits.update({"xs": np.float32(0.02), "xz": np.uint8(120), "us": np.float32(0.05), "uz": np.array(128 if out_type == "u8" else 3, y_np),
                  "os": np.float32(0.03), "oz": np.array(5, o_np), "ys": np.float32(0.07),
                  "yz": np.array(100 if out_type == "u8" else -20, y_np)})
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]), *op,
             N("QuantizeLinear", ["u", "us", "uz"], ["uq"]), N("DequantizeLinear", ["uq", "us", "uz"], ["ud"]),
             N("DequantizeLinear", ["other", "os", "oz"], ["of"]), N("Add", ["ud", "of"], ["s"], name="add")]
    if relu:
        nodes.append(N("Relu", ["s"], ["r"]))
    nodes.append(N("QuantizeLinear", ["r" if relu else "s", "ys", "yz"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)]
    outputs = [helper.make_tensor_value_info("y", y_proto, y_shape)]
    if keep_unit_output:  # both operands leave the graph: nothing to fold into
        outputs.append(helper.make_tensor_value_info("uq", y_proto, y_shape))
        if unit == "conv":
            outputs.append(helper.make_tensor_value_info("other", TensorProto.UINT8 if other_type == "u8" else TensorProto.INT8,
                                                         y_shape))
    graph = helper.make_graph(nodes, "qadd_fold", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": rng.integers(0, 256, x_shape).astype(np.uint8)}


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
    # 7-bit weights: AVX2's u8 x s8 kernels too; 40 = 16 + 16 + a part-filled panel
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
    folded_model, feeds = _model(**CASES[case])
    apart_model, _ = _model(**CASES[case], keep_unit_output=True)
    got = run_folded_and_apart(folded_model, apart_model, feeds, isa, lambda s: "+ QAdd" in s)
    ref = run_cpu(folded_model, feeds)[0]
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE + 1


def test_a_batch_of_five_images():
    # Rows of every image: the residual is indexed by output pixel across images.
    model, feeds = _model("conv", batch=5, seed=3)
    apart_model, _ = _model("conv", batch=5, seed=3, keep_unit_output=True)
    np.testing.assert_array_equal(session(model, fallback=False).run(None, feeds)[0],
                                  session(apart_model, fallback=False).run(None, feeds)[0])


def test_an_operand_that_broadcasts_keeps_the_add_apart():
    # A bias of two rows against [batch, 9, 24] outputs broadcasts along the rows: not a form the fold takes.
    import onnx
    m = onnx.load_from_string(_model("matmul")[0])
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
    """The 7-bit cases above run on AVX2's u8 x s8 pair kernels (8-bit ones on the int16 pairs)."""
    model, _ = _model(**CASES["conv residual, 7-bit weights, 40 channels"])
    assert "conv_gemm_u8s8_avx2_5x16" in step_kernels(model, "avx2")
    model, _ = _model(**CASES["conv residual"])
    assert "conv_gemm_u8s8_avx2_5x16" not in step_kernels(model, "avx2")
