"""Quantized element-wise regions folded into 256-byte tables (rewrites/qdq_lookup_tables.cc, ops/qlut.cc): SiLU as
quantizers write it (DQ -> Sigmoid -> Q -> DQ -> Mul -> Q), HardSwish, a Tanh, a requantization, uint8 and
int8. Every one of the 256 input bytes is fed, so the whole table is checked: within one quantization step
of ONNX Runtime's float ops (whose exp/sigmoid differ from ours in the last bits), on every ISA (the scalar,
AVX2 and AVX-512 VBMI lookups), and the region must have become one QLut step. Each ISA's lookup of longer
runs of bytes must then give exactly its table's entries, whatever the length's remainder."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
LUT_STEP_TOLERANCE = 1  # quantization steps between the table and ORT's float ops


def _model(body: list, q_type: int, zero: int, opset: int = 19, shape=(2, 128)) -> bytes:
    """x (the 256 quantized bytes, or `shape`) -> DQ -> body (reads 'd', writes 'f') -> Q -> y."""
    zp = np.array(zero, np.uint8 if q_type == TensorProto.UINT8 else np.int8)
    inits = {"s": np.float32(0.05), "z": zp, "s2": np.float32(0.04), "s3": np.float32(0.03)}
    nodes = [N("DequantizeLinear", ["x", "s", "z"], ["d"]), *body, N("QuantizeLinear", ["f", "s3", "z"], ["y"])]
    graph = helper.make_graph(nodes, "lut", [helper.make_tensor_value_info("x", q_type, list(shape))],
                              [helper.make_tensor_value_info("y", q_type, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION).SerializeToString()


REGIONS = {
    # SiLU with its sigmoid quantized in between, as onnxruntime's quantizer writes it
    "silu": [N("Sigmoid", ["d"], ["g"]), N("QuantizeLinear", ["g", "s2", "z"], ["gq"]),
             N("DequantizeLinear", ["gq", "s2", "z"], ["gd"]), N("Mul", ["d", "gd"], ["f"])],
    "hardswish": [N("HardSwish", ["d"], ["f"])],
    "x_times_hardsigmoid": [N("HardSigmoid", ["d"], ["h"], alpha=1 / 6, beta=0.5), N("Mul", ["d", "h"], ["f"])],
    "tanh_then_affine": [N("Tanh", ["d"], ["t"]), N("Mul", ["t", "s2"], ["m"]), N("Add", ["m", "s"], ["f"])],
    "requantize": [N("Identity", ["d"], ["f"])],
    "relu_clip_leaky": [N("Relu", ["d"], ["r"]), N("LeakyRelu", ["r"], ["l"], alpha=0.3),
                        N("Clip", ["l", "", "s2"], ["f"])],
}


@pytest.mark.parametrize("q_type,zero", [(TensorProto.UINT8, 128), (TensorProto.UINT8, 3), (TensorProto.INT8, -5)])
@pytest.mark.parametrize("region", sorted(REGIONS))
def test_a_quantized_element_wise_region_becomes_one_table_lookup(region, q_type, zero):
    model = _model(REGIONS[region], q_type, zero)
    dtype = np.uint8 if q_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype).reshape(2, 128)  # every byte
    ref = run_cpu(model, {"x": x})[0].astype(np.int32)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        steps = [s for v in placement(sess).compiled.values() for s in v]
        assert len(steps) == 1 and steps[0].startswith("QLut "), (isa, steps)  # not a QMul of x by a table
        got = sess.run(None, {"x": x})[0].astype(np.int32)
        assert np.abs(got - ref).max() <= LUT_STEP_TOLERANCE, (isa, region, np.abs(got - ref).max())


@pytest.mark.parametrize("q_type", [TensorProto.UINT8, TensorProto.INT8])
def test_every_isa_looks_runs_of_any_length_up_exactly_in_its_table(q_type):
    """The vector lookups (AVX2's 32 bytes a step, VBMI's 64) with their tails: every byte of runs of 1 to 4099
    bytes equals the entry that ISA's session gives for that byte alone."""
    dtype = np.uint8 if q_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(dtype)
    model = _model(REGIONS["silu"], q_type, 7 if q_type == TensorProto.UINT8 else -3, shape=("n",))
    every_byte = np.arange(info.min, info.max + 1).astype(dtype)
    rng = np.random.default_rng(5)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        table = sess.run(None, {"x": every_byte})[0]
        for n in (1, 17, 31, 32, 33, 63, 64, 65, 100, 4099):
            x = rng.integers(info.min, info.max + 1, n).astype(dtype)
            got = sess.run(None, {"x": x})[0]
            np.testing.assert_array_equal(got, table[x.astype(np.int32) - info.min], err_msg=f"{isa}, {n} bytes")
    assert len(set(table.tolist())) > 64  # a table with many distinct entries: a wrong row shows


def test_a_region_read_halfway_keeps_the_nodes_that_value_needs():
    """The sigmoid's float output is also a model output: the table still replaces the region's end, and
    the nodes computing the sigmoid stay for that output."""
    body = REGIONS["silu"]
    model_bytes = _model(body, TensorProto.UINT8, 128)
    import onnx

    model = onnx.load_from_string(model_bytes)
    model.graph.output.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, None))
    model_bytes = model.SerializeToString()
    x = np.arange(256).astype(np.uint8).reshape(2, 128)
    ref = run_cpu(model_bytes, {"x": x})
    got = session(model_bytes, fallback=False).run(None, {"x": x})
    assert np.abs(got[0].astype(np.int32) - ref[0].astype(np.int32)).max() <= LUT_STEP_TOLERANCE
    np.testing.assert_allclose(got[1], ref[1], atol=1e-6)
