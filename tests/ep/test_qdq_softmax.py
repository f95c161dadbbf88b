"""Attention's quantized softmax as one step (rewrites/qdq_softmax.cc, ops/qsoftmax.cc): DequantizeLinear(scores)
[-> Mul / Div by a constant] [-> Add mask] -> Softmax(last axis) -> QuantizeLinear runs as one QSoftmax. It must
give the bytes of the same nodes run apart on OptimEP (the Softmax's float output made a graph output too, which
the rewrite leaves alone), on every ISA, and ONNX Runtime's CPU EP's within one step of its own exp."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, run_folded_and_apart
from optim.ep_plugin import placement, session

N = helper.make_node
CPU_STEPS = 1  # output steps between OptimEP's exp and the CPU EP's


def _model(shape, *, scale_op="Mul", mask_shape=None, mask_first=False, x_type="u8", y_type="u8", axis=-1, opset=19,
           keep_float=False, seed=0):
    """x (int8 scores) -> DQ -> [scale_op by 0.125] -> [Add mask] -> Softmax -> Q -> y; keep_float: the Softmax's
    float output is a graph output too (then nothing fuses: the nodes run apart)."""
    rng = np.random.default_rng(seed)
    np_of = {"u8": np.uint8, "s8": np.int8}
    onnx_of = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8}
    inits = {"xs": np.float32(0.09), "xz": np.array(131 if x_type == "u8" else -7, np_of[x_type]),
             "c": np.float32(0.125 if scale_op == "Mul" else 8.0),
             "ys": np.float32(1 / 255), "yz": np.array(0 if y_type == "u8" else -128, np_of[y_type])}
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["s0"], name="dq")]
    last = "s0"
    if scale_op:
        nodes.append(N(scale_op, [last, "c"], ["s1"], name="scale"))
        last = "s1"
    inputs = [helper.make_tensor_value_info("x", onnx_of[x_type], shape)]
    if mask_shape is not None:
        nodes.append(N("Add", ["mask", last] if mask_first else [last, "mask"], ["s2"], name="mask_add"))
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, mask_shape))
        last = "s2"
    nodes.append(N("Softmax", [last], ["p"], axis=axis, name="softmax"))
    nodes.append(N("QuantizeLinear", ["p", "ys", "yz"], ["y"], name="q"))
    outputs = [helper.make_tensor_value_info("y", onnx_of[y_type], shape)]
    if keep_float:
        outputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "qsoftmax", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(np_of[x_type])
    feeds = {"x": rng.integers(info.min, info.max + 1, shape).astype(np_of[x_type])}
    if mask_shape is not None:  # 0 where attended, a large negative where not, as attention masks are
        feeds["mask"] = np.where(rng.random(mask_shape) < 0.2, np.float32(-10000), np.float32(0)).astype(np.float32)
    return model, feeds


CASES = {
    "bert: Mul, mask [B, 1, 1, K]": dict(shape=[2, 3, 16, 37], mask_shape=[2, 1, 1, 37]),
    "minilm: Mul, mask [1, 1, Q, K] first": dict(shape=[1, 4, 33, 33], mask_shape=[1, 1, 33, 33], mask_first=True),
    "Div, mask [K]": dict(shape=[2, 2, 5, 130], scale_op="Div", mask_shape=[130]),
    "mask of one value per row [B, H, Q, 1]": dict(shape=[2, 3, 9, 20], mask_shape=[2, 3, 9, 1]),
    "vit: Mul, no mask": dict(shape=[1, 3, 197, 197]),
    "no scale, mask": dict(shape=[3, 70, 64], scale_op=None, mask_shape=[3, 1, 64]),
    "int8 in and out": dict(shape=[2, 4, 12, 48], x_type="s8", y_type="s8", mask_shape=[2, 1, 1, 48]),
    "opset 11, last axis": dict(shape=[2, 4, 10, 24], opset=11, mask_shape=[2, 1, 1, 24]),
}


def _steps(sess):
    return [s for ss in placement(sess).compiled.values() for s in ss]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_softmax_gives_the_bytes_of_its_nodes_apart(case, isa):
    model, feeds = _model(**CASES[case])
    apart_model, _ = _model(**CASES[case], keep_float=True)
    c = CASES[case]
    scale = c.get("scale_op", "Mul")
    want = ("DequantizeLinear 'dq'" + (f" + {scale} 'scale'" if scale else "") + (" + Add 'mask_add'" if c.get("mask_shape") else "")
            + " + QSoftmax 'softmax' + QuantizeLinear 'q'")
    got = run_folded_and_apart(model, apart_model, feeds, isa, lambda step: step == want)
    assert _steps(session(model, fallback=False, isa=isa)) == [want]  # every node of the graph in that one step
    ref = run_cpu(model, feeds)[0]
    steps = np.abs(got.astype(np.int32) - ref.astype(np.int32))
    assert steps.max() <= CPU_STEPS, f"{case}: {int(steps.max())} steps from the CPU EP"


def test_a_softmax_over_another_axis_stays_apart():
    model, feeds = _model([2, 3, 8, 8], mask_shape=[2, 1, 1, 8], axis=1)
    sess = session(model, fallback=False)
    assert not placement(sess).rewrites.get("qdq_softmax")
    assert any("qdq_softmax: Softmax 'softmax': it does not normalize the last axis alone" in r
               for r in placement(sess).rewrite_refusals), placement(sess).rewrite_refusals
    ref = run_cpu(model, feeds)[0]
    assert np.abs(sess.run(None, feeds)[0].astype(np.int32) - ref.astype(np.int32)).max() <= CPU_STEPS


def test_a_mask_that_grows_the_scores_keeps_its_add_apart():
    # [2, 3, 8, 8] scores + a [4, 2, 3, 8, 8] mask: the Add makes a bigger tensor, which one row pass cannot write.
    model, feeds = _model([2, 3, 8, 8], mask_shape=[4, 2, 3, 8, 8])
    sess = session(model, fallback=False)
    assert not placement(sess).rewrites.get("qdq_softmax"), _steps(sess)
    got = sess.run(None, feeds)[0]
    assert got.shape == (4, 2, 3, 8, 8)
    assert np.abs(got.astype(np.int32) - run_cpu(model, feeds)[0].astype(np.int32)).max() <= CPU_STEPS


def test_a_scale_constant_that_adds_dims_keeps_the_nodes_apart():
    # [4, 9] scores * a [1, 1, 1] constant: the Mul's output is [1, 4, 9], a shape one row pass over x would not write.
    model, feeds = _model([4, 9])
    m = onnx.load_from_string(model)
    for init in m.graph.initializer:
        if init.name == "c":
            init.CopyFrom(numpy_helper.from_array(np.full((1, 1, 1), 0.125, np.float32), "c"))
    m.graph.output[0].type.tensor_type.ClearField("shape")
    sess = session(m.SerializeToString(), fallback=False)
    assert not placement(sess).rewrites.get("qdq_softmax")
    got = sess.run(None, feeds)[0]
    assert got.shape == (1, 4, 9)
    assert np.abs(got.astype(np.int32) - run_cpu(m.SerializeToString(), feeds)[0].astype(np.int32)).max() <= CPU_STEPS
