"""A DequantizeLinear folded into the channels-last GlobalAveragePool that alone reads it (a squeeze-excite's pool
in a QDQ model; rewrites/dequantize_pool.cc): the pool sums the bytes exactly and scales the mean, so the float
copy of the map is never made. The result is the float pool of the dequantized map up to float rounding (the
reference sums rounded floats in its own order): after the QuantizeLinear that follows, one step at most."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node


def _model(*, x_type=TensorProto.UINT8, hw=20, keep_dequantized=False, batch=2, seed=0):
    """x -> 1x1 QDQ conv (channels last) -> Q -> DQ -> GlobalAveragePool -> Q -> y, and the pooled map's float
    copy as a second output when keep_dequantized."""
    rng = np.random.default_rng(seed)
    c = 24
    x_np = np.uint8 if x_type == TensorProto.UINT8 else np.int8
    inits = {"xs": np.float32(0.02), "xz": np.array(3, x_np), "w": rng.integers(-127, 128, (c, c, 1, 1)).astype(np.int8),
             "ws": np.float32(0.004), "us": np.float32(0.05), "uz": np.array(-7 if x_np is np.int8 else 30, x_np),
             "ps": np.float32(0.01), "pz": np.uint8(128)}
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]), N("DequantizeLinear", ["w", "ws"], ["wf"]),
             N("Conv", ["xf", "wf"], ["u"], name="unit"), N("QuantizeLinear", ["u", "us", "uz"], ["uq"]),
             N("DequantizeLinear", ["uq", "us", "uz"], ["ud"], name="dq"), N("GlobalAveragePool", ["ud"], ["p"], name="pool"),
             N("QuantizeLinear", ["p", "ps", "pz"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.UINT8, [batch, c, 1, 1])]
    if keep_dequantized:
        outputs.append(helper.make_tensor_value_info("ud", TensorProto.FLOAT, [batch, c, hw, hw]))
    graph = helper.make_graph(nodes, "dequantize_pool", [helper.make_tensor_value_info("x", x_type, [batch, c, hw, hw])],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    info = np.iinfo(x_np)
    return model.SerializeToString(), {"x": rng.integers(info.min, info.max + 1, (batch, c, hw, hw)).astype(x_np)}


def _steps(sess) -> list[str]:
    return [s for ss in placement(sess).compiled.values() for s in ss]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("x_type", [TensorProto.UINT8, TensorProto.INT8], ids=["uint8", "int8"])
def test_the_pool_sums_the_bytes_and_matches_the_float_pool(x_type, isa):
    model, feeds = _model(x_type=x_type)
    sess = session(model, fallback=False, isa=isa)
    assert "DequantizeLinear 'dq' + NhwcGlobalAveragePool 'pool'" in _steps(sess), _steps(sess)
    got = sess.run(None, feeds)[0].astype(np.int32)
    ref = run_cpu(model, feeds)[0].astype(np.int32)
    assert np.abs(got - ref).max() <= 1


def test_a_dequantized_map_read_elsewhere_too_keeps_its_float_copy():
    # ONNX Runtime's basic optimizations give each reader of a DequantizeLinear its own copy (EnsureUniqueDQForNodeUnit):
    # the pool folds its copy, the other stays.
    model, feeds = _model(keep_dequantized=True)
    sess = session(model, fallback=False)
    assert "DequantizeLinear 'dq/duplicated' + NhwcGlobalAveragePool 'pool'" in _steps(sess), _steps(sess)
    assert "DequantizeLinear 'dq'" in _steps(sess), _steps(sess)
    got = sess.run(None, feeds)
    ref = run_cpu(model, feeds)
    assert np.abs(got[0].astype(np.int32) - ref[0].astype(np.int32)).max() <= 1
    np.testing.assert_array_equal(got[1], ref[1])
