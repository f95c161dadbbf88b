"""The DequantizeLinear (and the bias Add) after a QGemm folded into it (rewrites/dequantize_fold.cc,
ops/dequantize_after.h): a transformer quantized MatMul-only runs QGemm -> DequantizeLinear -> Add(bias) -> float
ops. The folded step must give the same floats as the same graph with the steps apart (the QGemm's uint8 output
made a graph output, which the fold leaves alone), on every ISA (int16-pair and VNNI kernels, one tile and many),
and ONNX Runtime's CPU EP's up to one quantization step of its own rounding."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, run_folded_and_apart
from optim.ep_plugin import placement, session

N = helper.make_node
Y_SCALE = 0.05


def _model(rows: int, k: int, n: int, *, bias: str = "row", keep_unit_output: bool = False, seed: int = 0):
    """x [2, rows, k] float -> Q -> DQ -> MatMul(DQ(W int8)) -> Q (uint8) -> DQ -> [Add(bias)] -> y (float)."""
    rng = np.random.default_rng(seed)
    inits = {"xs": np.float32(0.02), "xz": np.uint8(120), "w": rng.integers(-127, 128, (k, n)).astype(np.int8),
             "ws": rng.uniform(0.002, 0.01, n).astype(np.float32), "wz": np.zeros(n, np.int8),
             "ys": np.float32(Y_SCALE), "yz": np.uint8(128)}
    nodes = [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), N("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1), N("MatMul", ["xf", "wf"], ["u"], name="unit"),
             N("QuantizeLinear", ["u", "ys", "yz"], ["uq"]), N("DequantizeLinear", ["uq", "ys", "yz"], ["ud"], name="dq")]
    if bias == "none":
        nodes[-1].output[0] = "y"
    else:
        inits["b"] = rng.standard_normal({"row4": [1, 1, 1, n], "row3": [1, 1, n]}.get(bias, [n])).astype(np.float32)
        nodes.append(N("Add", ["b", "ud"] if bias == "row_first" else ["ud", "b"], ["y"], name="bias_add"))
    if bias == "row_first":
        inits["b"] = inits["b"].reshape(n)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, rows, n] if bias == "row4" else [2, rows, n])]
    if keep_unit_output:
        outputs.append(helper.make_tensor_value_info("uq", TensorProto.UINT8, [2, rows, n]))
    graph = helper.make_graph(nodes, "dq_fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, rows, k])], outputs,
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    return model, {"x": rng.standard_normal((2, rows, k)).astype(np.float32)}


CASES = {
    "bias row, many tiles": dict(rows=70, k=96, n=80, bias="row"),
    "bias first operand": dict(rows=9, k=40, n=24, bias="row_first"),
    "bias [1, 1, N]": dict(rows=9, k=40, n=24, bias="row3"),
    "no bias Add": dict(rows=17, k=33, n=20, bias="none"),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_folded_dequantization_gives_the_floats_of_the_steps_apart(case, isa):
    folded_model, feeds = _model(**CASES[case])
    apart_model, _ = _model(**CASES[case], keep_unit_output=True)
    folded = session(folded_model, fallback=False, isa=isa)
    apart = session(apart_model, fallback=False, isa=isa)
    steps = [s for ss in placement(folded).compiled.values() for s in ss]
    want_label = "QGemm 'unit' + DequantizeLinear 'dq'" + ("" if CASES[case]["bias"] == "none" else " + Add 'bias_add'")
    assert want_label in steps, steps
    assert placement(folded).rewrites.get("dequantize_fold") == 1
    assert not placement(apart).rewrites.get("dequantize_fold")
    got = folded.run(None, feeds)[0]
    np.testing.assert_array_equal(got, apart.run(None, feeds)[0], err_msg=f"{case} on {isa}")
    ref = run_cpu(folded_model, feeds)[0]
    assert np.abs(got - ref).max() <= Y_SCALE * 1.0001  # one step of the QGemm's own quantization at most


def test_a_dequantization_read_by_several_nodes_stays_apart():
    # ONNX Runtime gives each reader a DequantizeLinear of its own, so the QGemm's bytes have two readers.
    model, feeds = _model(rows=9, k=40, n=24, bias="none")
    m = onnx.load_from_string(model)
    m.graph.node.append(N("Relu", ["y"], ["r"]))
    m.graph.node.append(N("Mul", ["y", "r"], ["z"]))
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    sess = session(m.SerializeToString(), fallback=False)
    p = placement(sess)
    assert not p.rewrites.get("dequantize_fold"), p.compiled
    got = sess.run(None, feeds)
    ref = run_cpu(m.SerializeToString(), feeds)
    assert np.abs(got[0] - ref[0]).max() <= Y_SCALE * 1.0001


def test_a_bias_that_adds_a_dim_keeps_its_add():
    # [1, 1, 1, N] against the [2, rows, N] product broadcasts to 4-D: the Add changes the shape, so only the
    # DequantizeLinear folds and the Add runs after it.
    model, feeds = _model(rows=9, k=40, n=24, bias="row4")
    sess = session(model, fallback=False)
    steps = [s for ss in placement(sess).compiled.values() for s in ss]
    assert "QGemm 'unit' + DequantizeLinear 'dq'" in steps and "Add 'bias_add'" in steps, steps
    got = sess.run(None, feeds)[0]
    assert got.shape == (1, 2, 9, 24)
    assert np.abs(got - run_cpu(model, feeds)[0]).max() <= Y_SCALE * 1.0001


def _then_gelu(model: bytes, approximate: str, requantize: bool) -> bytes:
    """The model's float output y through Gelu (and a QuantizeLinear to uint8 when requantize): the FFN's middle."""
    m = onnx.load_from_string(model)
    for node in m.graph.node:
        node.output[:] = ["y_lin" if o == "y" else o for o in node.output]
    m.graph.node.append(N("Gelu", ["y_lin"], ["y_gelu" if requantize else "y"], approximate=approximate, name="gelu"))
    out = m.graph.output[0]
    if requantize:
        m.graph.initializer.extend([numpy_helper.from_array(np.float32(0.03), "gs"), numpy_helper.from_array(np.uint8(20), "gz")])
        m.graph.node.append(N("QuantizeLinear", ["y_gelu", "gs", "gz"], ["y"], name="requantize"))
        out.type.tensor_type.elem_type = TensorProto.UINT8
    m.opset_import[0].version = 20  # Gelu
    return m.SerializeToString()


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("requantize", [True, False], ids=["then quantized", "float"])
def test_a_gelu_and_its_quantization_fold_in_too(isa, approximate, requantize):
    """QGemm -> DQ -> Add(bias) -> Gelu -> QuantizeLinear, one step: the same bytes as the steps apart (the GELU and
    quantize kernels give a value the same bits wherever it lies in a row; quantized, the step looks each byte up
    in per-column tables those kernels made)."""
    base, feeds = _model(rows=70, k=96, n=80, bias="row", seed=5)
    apart_base, _ = _model(rows=70, k=96, n=80, bias="row", seed=5, keep_unit_output=True)
    folded = session(_then_gelu(base, approximate, requantize), fallback=False, isa=isa)
    apart = session(_then_gelu(apart_base, approximate, requantize), fallback=False, isa=isa)
    want = "QGemm 'unit' + DequantizeLinear 'dq' + Add 'bias_add' + Gelu 'gelu'" + (" + QuantizeLinear 'requantize'" if requantize else "")
    steps = [s for ss in placement(folded).compiled.values() for s in ss]
    assert want in steps, steps
    assert not any("+ Gelu" in s for ss in placement(apart).compiled.values() for s in ss)
    np.testing.assert_array_equal(folded.run(None, feeds)[0], apart.run(None, feeds)[0], err_msg=f"{approximate} on {isa}")


@pytest.mark.parametrize("isa", ISAS)
def test_a_requantized_gelu_too_wide_for_tables_computes_its_rows(isa):
    """Past 16384 columns (4 MiB of tables) the folded GELU and QuantizeLinear run on float rows instead of per-column
    tables: the same bytes as the steps apart either way."""
    base, feeds = _model(rows=3, k=8, n=16385, bias="row", seed=6)
    apart_base, _ = _model(rows=3, k=8, n=16385, bias="row", seed=6, keep_unit_output=True)
    run_folded_and_apart(_then_gelu(base, "none", True), _then_gelu(apart_base, "none", True), feeds, isa,
                         lambda step: step.endswith("+ Gelu 'gelu' + QuantizeLinear 'requantize'"))
