"""`optim quantize --target`: a model with one layer that int8 wrecks (its input has an outlier channel,
100x the others, as transformers' hidden states do) misses the target quantized everywhere; with the
target, the search keeps that layer, and little else, in float, the file shows it unquantized, and the
report says what it cost. Also: the QDQ edits that stand in for re-quantizing during the search equal
onnxruntime's own exclusion, target syntax errors, and targets that cannot be met."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from helpers import make_model, rand, run_cpu
from optim.cli import main
from optim.optimizer import OptimizeError
from optim.optimizer.quantization import parse_target, quantize
from optim.optimizer.quantization.backend import StaticQuantizer
from optim.optimizer.quantization.qdq_graph import quantized_nodes, with_nodes_in_float

N = helper.make_node
TARGET = 0.995  # cosine of the logits on the held-out batches
OUTLIER_CHANNEL, OUTLIER_SCALE = 3, 100.0
EDIT_ATOL = 1e-5  # QDQ edit vs onnxruntime's exclusion, same CPU EP, outputs of size ~1-10


def _inputs(seed: int, batch: int = 16) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((batch, 16)).astype(np.float32)
    x[:, OUTLIER_CHANNEL] *= OUTLIER_SCALE
    return x


@pytest.fixture(scope="module")
def sensitive(tmp_path_factory):
    """fc1 -> relu -> fc2 -> relu -> fc3 (Gemm); fc1's input has one channel 100x larger than the others,
    so one int8 scale for that input leaves the other channels a few steps each."""
    rng = np.random.default_rng(5)
    w1 = rand(rng, 32, 16) * 0.5
    w1[:, OUTLIER_CHANNEL] /= OUTLIER_SCALE  # the layer itself is well behaved: the outlier is in the data
    model = make_model(
        [N("Gemm", ["x", "w1", "b1"], ["h1"], transB=1, name="fc1"), N("Relu", ["h1"], ["r1"], name="relu1"),
         N("Gemm", ["r1", "w2", "b2"], ["h2"], transB=1, name="fc2"), N("Relu", ["h2"], ["r2"], name="relu2"),
         N("Gemm", ["r2", "w3", "b3"], ["logits"], transB=1, name="fc3")],
        {"x": (np.float32, ["batch", 16])}, ["logits"],
        {"w1": w1, "b1": rand(rng, 32) * 0.1, "w2": rand(rng, 32, 32) * 0.3, "b2": rand(rng, 32) * 0.1,
         "w3": rand(rng, 10, 32) * 0.3, "b3": rand(rng, 10) * 0.1})
    d = tmp_path_factory.mktemp("sensitive")
    (d / "mlp.onnx").write_bytes(model)
    (d / "calib").mkdir()
    for i in range(6):
        np.savez(d / "calib" / f"{i}.npz", x=_inputs(i))
    np.savez(d / "heldout.npz", x=_inputs(100, batch=64))
    return d / "mlp.onnx", d / "calib", d / "heldout.npz"


def invoke(*args):
    return CliRunner().invoke(main, ["quantize", *[str(a) for a in args]])


def optimep_row(report: dict) -> dict:
    return next(r for r in report["accuracy"] if r["runtime"] == "OptimEP")


def reads_dequantized(path, node_name: str) -> bool:
    graph = onnx.load(str(path)).graph
    dequantized = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    node = next(n for n in graph.node if n.name == node_name)
    return any(i in dequantized for i in node.input)


def test_without_a_target_the_outlier_layer_misses_it(sensitive, tmp_path):
    model, calib, heldout = sensitive
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--eval", heldout, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert optimep_row(report)["cosine"] < TARGET and report["fallback"] is None


def test_target_keeps_the_outlier_layer_in_float(sensitive, tmp_path):
    model, calib, heldout = sensitive
    out = tmp_path / "q.onnx"
    r = invoke(model, "-o", out, "--calib", calib, "--eval", heldout, "--logits", "logits",
               "--target", f"cosine>={TARGET}", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    fallback = report["fallback"]
    kept = [s["node"] for s in fallback["kept_float"]]
    print(f"cosine {fallback['int8_value']:.5f} -> {fallback['final_value']:.5f}, kept {kept}, "
          f"latency {fallback['latency_ms']}")
    assert kept == ["fc1"], fallback["sensitivity"]
    assert fallback["kept_float"][0]["op_type"] == "Gemm"
    assert fallback["sensitivity"][0]["node"] == "fc1" and fallback["candidates"] == 3
    assert fallback["int8_value"] < TARGET <= fallback["final_value"]
    assert optimep_row(report)["cosine"] >= TARGET
    assert set(fallback["latency_ms"]) == {"float", "int8", "final"} and fallback["latency_change"] is not None
    # The file: fc1 reads float tensors, the other layers stay quantized.
    assert not reads_dequantized(out, "fc1")
    assert reads_dequantized(out, "fc2") and reads_dequantized(out, "fc3")
    assert "sensitivity: node 3/3" in r.stderr and "(target met)" in r.stderr


def test_nodes_excluded_by_hand_are_not_candidates(sensitive, tmp_path):
    model, calib, heldout = sensitive
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--eval", heldout, "--exclude", "fc3",
               "--target", f"cosine>={TARGET}", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["excluded"] == ["fc3"] and report["fallback"]["candidates"] == 2
    assert [s["node"] for s in report["fallback"]["kept_float"]] == ["fc1"]
    # fc3 reads fc2's quantized output (onnxruntime hands all readers the dequantized tensor), but its own
    # weights stay float: so it was a candidate by the QDQ reading alone, and must not be one.
    fc3 = next(n for n in onnx.load(str(tmp_path / "q.onnx")).graph.node if n.name == "fc3")
    assert reads_dequantized(tmp_path / "q.onnx", "fc3") and fc3.input[1] == "w3"


def test_target_through_the_python_api(sensitive, tmp_path):
    model, calib, heldout = sensitive
    result = quantize(model, tmp_path / "q.onnx", calibration=calib, evaluation=heldout, target="sqnr>=30")
    assert result.fallback["target"] == "sqnr>=30"
    assert min(r.sqnr_db for r in result.accuracy) >= 30
    assert "fc1" in [s["node"] for s in result.fallback["kept_float"]]


def test_the_text_report_names_the_float_layer_and_its_cost(sensitive, tmp_path):
    model, calib, heldout = sensitive
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--eval", heldout, "--target", f"cosine>={TARGET}")
    assert r.exit_code == 0, r.output
    assert f"target cosine>={TARGET}: " in r.stdout and "with 1 of 3 quantized node(s) in float" in r.stdout
    assert "  kept in float: fc1 (Gemm): " in r.stdout and "with only it quantized" in r.stdout
    assert "latency on OptimEP (median): float " in r.stdout and "over int8 everywhere" in r.stdout


def test_a_target_met_already_keeps_everything_quantized(sensitive, tmp_path):
    model, calib, heldout = sensitive
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--eval", heldout, "--target", "cosine>=0.5", "--json")
    assert r.exit_code == 0, r.output
    fallback = json.loads(r.stdout)["fallback"]
    assert fallback["kept_float"] == [] and fallback["int8_value"] >= 0.5
    assert "sensitivity:" not in r.stderr
    text = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--eval", heldout, "--target", "cosine>=0.5")
    assert "target cosine>=0.5 met with every node quantized" in text.stdout


def test_a_target_that_cannot_be_met_writes_nothing(sensitive, tmp_path):
    model, calib, heldout = sensitive
    out = tmp_path / "q.onnx"
    # fc1 in float gives an SQNR in the 30s; 60 dB needs more than the one float layer allowed.
    r = invoke(model, "-o", out, "--calib", calib, "--eval", heldout, "--target", "sqnr>=60", "--max-float", "1")
    assert r.exit_code == 2, r.output
    assert "target sqnr>=60 cannot be met: with the 1 most sensitive of 3 quantized nodes in float" in r.output
    assert "nothing written" in r.output and "--max-float" in r.output and "Traceback" not in r.output
    assert not out.exists()


@pytest.mark.parametrize("target, extra, says", [
    ("cosine=0.99", [], "--target 'cosine=0.99' is not METRIC>=NUMBER"),
    ("accuracy>=0.9", [], "--target metric 'accuracy' is unknown"),
    ("cosine>=1.5", [], "--target cosine>=1.5 is out of range"),
    ("top1>=0.9", [], "--target top1>=... needs --logits OUTPUT"),
    ("cosine>=0.99", ["--dynamic"], "--target needs static quantization"),
])
def test_bad_targets(sensitive, tmp_path, target, extra, says):
    model, calib, _ = sensitive
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--target", target, *extra)
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output
    assert not (tmp_path / "q.onnx").exists()


def test_parse_target():
    assert str(parse_target(" mean_cosine >= 0.99 ")) == "mean_cosine>=0.99"
    assert parse_target("sqnr>=-3").threshold == -3.0
    assert parse_target("top1>=.9", logits="logits").metric == "top1"
    with pytest.raises(OptimizeError):
        parse_target("cosine>0.9")


def test_qdq_edit_equals_onnxruntime_exclusion(tmp_path):
    """The search measures 'node in float' by editing the QDQ model; that edit must give what the
    quantizer gives with the node excluded (here MatMuls only, as for transformers)."""
    rng = np.random.default_rng(7)
    model = make_model(
        [N("MatMul", ["x", "w1"], ["m1"], name="mm1"), N("Add", ["m1", "b1"], ["a1"], name="add1"),
         N("Relu", ["a1"], ["r1"], name="relu1"), N("MatMul", ["r1", "w2"], ["m2"], name="mm2"),
         N("Add", ["m2", "r1"], ["a2"], name="residual"), N("MatMul", ["a2", "w3"], ["m3"], name="mm3"),
         N("Add", ["m3", "b3"], ["y"], name="add3")],
        {"x": (np.float32, [4, 16])}, ["y"],
        {"w1": rand(rng, 16, 24), "b1": rand(rng, 24), "w2": rand(rng, 24, 24), "w3": rand(rng, 24, 8), "b3": rand(rng, 8)})
    (tmp_path / "f.onnx").write_bytes(model)
    float_model = onnx.load(str(tmp_path / "f.onnx"))
    batches = [{"x": rng.standard_normal((4, 16)).astype(np.float32)} for _ in range(4)]
    lines = []
    quantizer = StaticQuantizer(tmp_path / "f.onnx", tmp_path, batches, method="minmax", activation_type="uint8",
                                per_channel=True, op_types=["MatMul"], progress=lines.append)
    everything = onnx.load(str(quantizer.build([])))
    names = {n for n, _ in quantized_nodes(everything, {"MatMul"})}
    assert names == {"mm1", "mm2", "mm3"}
    x = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    for in_float in [{"mm1"}, {"mm2"}, {"mm3"}, {"mm1", "mm3"}, {"mm2", "mm3"}, names]:
        edited = with_nodes_in_float(everything, float_model, in_float, names - in_float)
        excluded = onnx.load(str(quantizer.build(sorted(in_float))))
        got, want = run_cpu(edited.SerializeToString(), x)[0], run_cpu(excluded.SerializeToString(), x)[0]
        assert np.abs(got - want).max() <= EDIT_ATOL, (in_float, np.abs(got - want).max())
        qdq_count = sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in edited.graph.node)
        assert qdq_count == sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in excluded.graph.node), in_float
    assert sum(line.startswith("calibrating") for line in lines) == len(batches)  # once: the ranges are cached


def test_qdq_edit_declines_nodes_the_quantizer_reshaped(sensitive, tmp_path):
    """Gemm -> Relu: the quantizer folds the Relu into the Gemm's output quantization, so only quantizing
    again can say what excluding the Gemm gives (the search then does)."""
    model, calib, _ = sensitive
    batches = [dict(np.load(f)) for f in sorted(calib.glob("*.npz"))]
    quantizer = StaticQuantizer(model, tmp_path, batches, method="minmax", activation_type="uint8", per_channel=True,
                                op_types=None)
    everything = onnx.load(str(quantizer.build([])))
    assert "Relu" not in {n.op_type for n in everything.graph.node}
    assert with_nodes_in_float(everything, onnx.load(str(model)), {"fc1"}, {"fc2", "fc3"}) is None
