"""QuantizeLinear(Concat(DequantizeLinear(x_i)...)) runs on the quantized tensors (rewrites/qdq_concat.cc):
inputs quantized like the output are copied as bytes, the others go through a 256-byte requantization
table, and the result equals ONNX's float Q/DQ definition exactly, on every ISA."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
NP_OF = {"u8": np.uint8, "s8": np.int8}
ONNX_OF = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8}


def _model(types, out_type, axis, same_as_output, seed):
    """Concat of len(types) dequantized inputs (input `same_as_output` quantized as the output is)."""
    rng = np.random.default_rng(seed)
    inits = {"sy": np.float32(0.07), "zy": np.array(3 if out_type == "u8" else -3, NP_OF[out_type])}
    nodes, inputs, feeds = [], [], {}
    for k, t in enumerate(types):
        if k == same_as_output:
            inits[f"s{k}"], inits[f"z{k}"] = inits["sy"], inits["zy"]
            t = out_type
        else:
            inits[f"s{k}"] = np.float32(rng.uniform(0.01, 0.2))
            inits[f"z{k}"] = np.array(rng.integers(0, 40), NP_OF[t])
        shape = [2, 3 + k, 5, 4] if axis == 1 else [2, 4, 5, 2 + k]
        nodes.append(N("DequantizeLinear", [f"x{k}", f"s{k}", f"z{k}"], [f"d{k}"]))
        inputs.append(helper.make_tensor_value_info(f"x{k}", ONNX_OF[t], shape))
        info = np.iinfo(NP_OF[t])
        feeds[f"x{k}"] = rng.integers(info.min, info.max + 1, shape).astype(NP_OF[t])
    nodes += [N("Concat", [f"d{k}" for k in range(len(types))], ["cat"], axis=axis, name="cat"),
              N("QuantizeLinear", ["cat", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qconcat", inputs, [helper.make_tensor_value_info("y", ONNX_OF[out_type], None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), feeds


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("types,out_type,axis,same", [
    (["u8", "u8", "u8"], "u8", 1, 1),
    (["s8", "u8"], "s8", 3, 0),
    (["u8", "s8", "u8", "u8"], "u8", -1, None),
])
def test_a_quantized_concat_moves_bytes_and_equals_onnx(types, out_type, axis, same, isa):
    model, feeds = _model(types, out_type, axis, same, seed=len(types) * 10 + axis)
    sess = session(model, fallback=False, isa=isa)
    steps = [s.split(" ")[0] for ss in placement(sess).compiled.values() for s in ss]
    tables = len(types) - (same is not None)
    assert sorted(steps) == sorted(["Concat"] + ["QLut"] * tables), steps
    assert placement(sess).rewrites.get("qdq_concat") == 1
    np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


def test_a_concat_with_a_float_input_keeps_its_conversions_and_says_why():
    model, feeds = _model(["u8", "u8"], "u8", 1, None, seed=1)
    m = onnx.load_from_string(model)
    m.graph.input.append(helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, 2, 5, 4]))
    cat = next(n for n in m.graph.node if n.op_type == "Concat")
    cat.input.append("f")
    model = m.SerializeToString()
    feeds["f"] = np.random.default_rng(0).standard_normal([2, 2, 5, 4]).astype(np.float32)
    p = placement(session(model, fallback=False))
    assert "qdq_concat" not in p.rewrites
    assert any(r.startswith("qdq_concat: Concat 'cat': an input is not a per-tensor DequantizeLinear") for r in p.rewrite_refusals), p.rewrite_refusals
