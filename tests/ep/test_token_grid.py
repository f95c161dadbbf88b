"""Transformer tokens [B, H*W, C] seen as the channels-last map [B, H, W, C] they are (rewrites/token_grid.cc):
SegFormer's Mix-FFN writes tokens -> Transpose -> Reshape [B, C, H, W] -> depthwise conv -> Reshape [B, C, H*W] ->
Transpose; on OptimEP the transposes and the layout changes around the convolution become views (Reshape), in
float and in int8 (the quantized transposes that quantized_data_movement leaves), with results equal to the CPU EP."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, assert_close, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
H, W, C = 6, 5, 16
FLOAT_TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def _mix_ffn(batch, dynamic_batch: bool, quantized: bool):
    """tokens -> Transpose -> Reshape [B, C, H, W] -> depthwise 3x3 -> Reshape [B, C, H*W] -> Transpose -> + tokens."""
    rng = np.random.default_rng(0)
    inits = {"w": (rng.standard_normal((C, 1, 3, 3)) * 0.3).astype(np.float32), "b": rng.standard_normal(C).astype(np.float32),
             "to_map": np.array([-1, C, H, W], np.int64), "to_tokens": np.array([0, C, -1], np.int64)}
    x = "tokens"
    nodes = []
    if quantized:  # every tensor between the ops quantized, as `optim quantize` writes them
        inits.update({"s": np.float32(0.05), "z": np.uint8(128), "ws": np.float32(0.01), "wz": np.int8(0)})
        q = lambda v: [N("QuantizeLinear", [v, "s", "z"], [v + "_q"]), N("DequantizeLinear", [v + "_q", "s", "z"], [v + "_dq"])]  # noqa: E731
        nodes += q("tokens")
        x = "tokens_dq"
        nodes += [N("QuantizeLinear", ["w", "ws", "wz"], ["wq"]), N("DequantizeLinear", ["wq", "ws", "wz"], ["wd"])]
    weight = "wd" if quantized else "w"
    chain = [("Transpose", [x], "t1", dict(perm=[0, 2, 1])), ("Reshape", ["t1_in", "to_map"], "map", {}),
             ("Conv", ["map_in", weight, "b"], "dw", dict(group=C, kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
             ("Reshape", ["dw_in", "to_tokens"], "flat", {}), ("Transpose", ["flat_in"], "t2", dict(perm=[0, 2, 1])),
             ("Add", ["t2_in", x], "y", {})]
    prev = None
    for op, ins, out, attrs in chain:
        ins = [(prev if i.endswith("_in") else i) for i in ins]
        nodes.append(N(op, ins, [out], name=op.lower() + "_" + out, **attrs))
        prev = out
        if quantized and op != "Add":
            nodes += q(out)
            prev = out + "_dq"
    dim0 = "batch" if dynamic_batch else batch
    graph = helper.make_graph(nodes, "mix_ffn", [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [dim0, H * W, C])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim0, H * W, C])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION).SerializeToString()
    return model, {"tokens": rng.standard_normal((batch, H * W, C)).astype(np.float32)}


@pytest.mark.parametrize("quantized", [False, True], ids=["fp32", "int8"])
@pytest.mark.parametrize("batch,dynamic", [(1, False), (3, True)])
def test_transposes_and_layout_changes_around_the_conv_become_views(quantized, batch, dynamic):
    model, feeds = _mix_ffn(batch, dynamic, quantized)
    sess = session(model, fallback=False)
    p = placement(sess)
    ops = [s.split(" ")[0] for ss in p.compiled.values() for s in ss]
    assert p.rewrites.get("token_grid", 0) >= 1, (p.rewrites, ops)  # ORT may have merged one side already
    assert not {"Transpose", "ToNhwc", "ToNchw"} & set(ops), ops
    got = sess.run(None, feeds)[0]
    want = run_cpu(model, feeds)[0]
    if quantized:  # the same integer units on both sides up to the CPU EP's rounding of the convolution
        assert np.abs(got - want).max() <= 2 * 0.05 + 1e-6
    else:
        assert_close(got, want, **FLOAT_TOLERANCE, what="y")


def test_a_map_that_regroups_the_channels_keeps_its_transposes():
    # [B, 30, 16] tokens read as a map of 8 channels of 12 x 5: not the token grid (a channel is not a token's
    # last dim), so the rewrite leaves the transposes, says why, and the results hold.
    rng = np.random.default_rng(1)
    inits = {"w": (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32),
             "to_map": np.array([0, C // 2, 2 * H, W], np.int64)}
    nodes = [N("Transpose", ["tokens"], ["t1"], perm=[0, 2, 1]), N("Reshape", ["t1", "to_map"], ["map"], name="to_map"),
             N("Conv", ["map", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "regroup", [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [2, H * W, C])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION).SerializeToString()
    feeds = {"tokens": rng.standard_normal((2, H * W, C)).astype(np.float32)}
    sess = session(model, fallback=False)
    p = placement(sess)
    assert not p.rewrites.get("token_grid")
    assert ("token_grid: Reshape 'to_map': its tokens and feature map are not [B, H*W, C] and [B, C, H, W] of known "
            "H, W, C") in p.rewrite_refusals, p.rewrite_refusals
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], **FLOAT_TOLERANCE, what="y")
