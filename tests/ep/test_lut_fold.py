"""A quantized element-wise region (a QLut: DequantizeLinear -> HardSwish / Sigmoid / ... -> QuantizeLinear as a
256-byte table) folded into the integer unit that alone makes its input (rewrites/lut_fold.cc, ops/lut_after.h):
each tile the unit finishes is looked up in cache. The folded step must give the bytes of the same graph with the
unit's output kept (a graph output, which the fold leaves alone) on every ISA, for QGemm and for dense, depthwise
(stride 1 and 2) and residual (QAdd folded first) convolutions."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, run_folded_and_apart
from optim.ep_plugin import placement, session

N = helper.make_node
INT8_STEP_TOLERANCE = 1  # the CPU EP's requantization rounds in its own order: one step apart, then the table


def _model(unit: str, *, act="HardSwish", stride=1, residual=False, out_type=TensorProto.UINT8, keep_unit_output=False,
           batch=2, seed=0):
    """x (u8) -> unit (conv: 3x3 dense; depthwise: 3x3 per channel; matmul: [batch, 9, 32] x [32, 24]) -> Q
    [-> + x -> Q] -> DQ -> act -> Q (out_type) -> y."""
    rng = np.random.default_rng(seed)
    c = 32
    if unit == "matmul":
        x_shape = y_shape = None
        x_shape, y_shape = [batch, 9, c], [batch, 9, c]
        inits = {"w": rng.integers(-127, 128, (c, c)).astype(np.int8), "ws": np.float32(0.004), "wz": np.int8(0)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"]), N("MatMul", ["xf", "wf"], ["u"], name="unit")]
    else:
        group = c if unit == "depthwise" else 1
        hw, out_hw = 12, (12 - 1) // stride + 1
        x_shape, y_shape = [batch, c, hw, hw], [batch, c, out_hw, out_hw]
        inits = {"w": rng.integers(-127, 128, (c, c // group, 3, 3)).astype(np.int8),
                 "ws": rng.uniform(0.002, 0.01, c).astype(np.float32), "wz": np.zeros(c, np.int8),
                 "b": rng.standard_normal(c).astype(np.float32)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
              N("Conv", ["xf", "wf", "b"], ["u"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride],
                group=group, name="unit")]
    out_np = np.uint8 if out_type == TensorProto.UINT8 else np.int8
    inits.update({"xs": np.float32(0.02), "xz": np.uint8(120), "us": np.float32(0.05), "uz": np.uint8(128),
                  "rs": np.float32(0.06), "rz": np.uint8(125), "as": np.float32(0.02), "az": np.array(20, out_np)})
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]), *op, N("QuantizeLinear", ["u", "us", "uz"], ["uq"])]
    kept, before_act = "uq", ("uq", "us", "uz")
    if residual:  # + a 1x1 QDQ convolution of x (channels last like the unit, as in a ResNet's downsampling branch)
        inits.update({"w1": rng.integers(-127, 128, (c, c, 1, 1)).astype(np.int8), "w1s": np.float32(0.003)})
        nodes += [N("DequantizeLinear", ["w1", "w1s"], ["w1f"]), N("Conv", ["xf", "w1f"], ["r1"], name="branch"),
                  N("QuantizeLinear", ["r1", "us", "uz"], ["r1q"]), N("DequantizeLinear", ["r1q", "us", "uz"], ["r1d"]),
                  N("DequantizeLinear", ["uq", "us", "uz"], ["ud"]), N("Add", ["ud", "r1d"], ["s"], name="add"),
                  N("QuantizeLinear", ["s", "rs", "rz"], ["sq"])]
        kept, before_act = "sq", ("sq", "rs", "rz")
    nodes += [N("DequantizeLinear", list(before_act), ["af"]), N(act, ["af"], ["a"]),
              N("QuantizeLinear", ["a", "as", "az"], ["y"], name="table")]
    outputs = [helper.make_tensor_value_info("y", out_type, y_shape)]
    if keep_unit_output:
        outputs.append(helper.make_tensor_value_info(kept, TensorProto.UINT8, y_shape))
    graph = helper.make_graph(nodes, "lut_fold", [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)], outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": rng.integers(0, 256, x_shape).astype(np.uint8)}


def _steps(sess) -> list[str]:
    return [s for ss in placement(sess).compiled.values() for s in ss]


CASES = {
    "convolution, HardSwish": dict(unit="conv"),
    "convolution, Sigmoid": dict(unit="conv", act="Sigmoid"),
    "depthwise": dict(unit="depthwise"),
    "depthwise, stride 2": dict(unit="depthwise", stride=2),
    "convolution, residual Add, then the table": dict(unit="conv", residual=True),  # the Add folds first
    "MatMul": dict(unit="matmul"),
    "MatMul, Sigmoid": dict(unit="matmul", act="Sigmoid"),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_folded_table_gives_the_bytes_of_the_pair_kept_apart(case, isa):
    model, feeds = _model(**CASES[case])
    apart_model, _ = _model(**CASES[case], keep_unit_output=True)
    got = run_folded_and_apart(model, apart_model, feeds, isa, lambda s: s.endswith(" + QLut 'table'"))
    ref = run_cpu(model, feeds)[0]
    # One step at the unit can move the table's output further where the activation is steep.
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 4 * INT8_STEP_TOLERANCE


def test_a_table_that_changes_the_type_stays_apart_and_says_why():
    model, feeds = _model("conv", out_type=TensorProto.INT8)
    sess = session(model, fallback=False)
    p = placement(sess)
    assert not any("+ QLut" in s for s in _steps(sess)), _steps(sess)
    assert any(r.startswith("lut_fold: QLut 'table': its output type differs") for r in p.rewrite_refusals), p.rewrite_refusals
    got = sess.run(None, feeds)[0]
    assert np.abs(got.astype(np.int32) - run_cpu(model, feeds)[0].astype(np.int32)).max() <= 4 * INT8_STEP_TOLERANCE
