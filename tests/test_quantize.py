"""`optim quantize` / optimizer.quantization.quantize: static QDQ with calibration from files, folders,
functions or random data; dynamic; the accuracy report measured on OptimEP; and every bad input as one
sentence with exit code 2 and no file written."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from helpers import make_model, rand
from optim.cli import main

N = helper.make_node
RNG = np.random.default_rng(21)
# A small conv net quantizes with little loss: the accuracy report must show it.
MIN_COSINE = 0.999


@pytest.fixture(scope="module")
def convnet(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant")
    model = make_model(
        [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
         N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]), N("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         N("Relu", ["c2"], ["r2"]), N("GlobalAveragePool", ["r2"], ["g"]), N("Flatten", ["g"], ["f"]),
         N("Gemm", ["f", "w3", "b3"], ["logits"], transB=1)],
        {"x": (np.float32, ["batch", 3, 12, 12])}, ["logits"],
        {"w1": rand(RNG, 8, 3, 3, 3) * 0.3, "b1": rand(RNG, 8) * 0.1, "w2": rand(RNG, 16, 8, 3, 3) * 0.2,
         "w3": rand(RNG, 10, 16), "b3": rand(RNG, 10) * 0.1})
    path = d / "net.onnx"
    path.write_bytes(model)
    calib = d / "calib"
    calib.mkdir()
    for i in range(10):
        np.savez(calib / f"b{i:02d}.npz", x=np.random.default_rng(i).standard_normal((2, 3, 12, 12)).astype(np.float32))
    return path, calib


def invoke(*args):
    return CliRunner().invoke(main, ["quantize", *[str(a) for a in args]])


def qdq_ops(path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node} & {"QuantizeLinear", "DequantizeLinear"}


def test_static_quantization_from_a_folder_reports_accuracy_on_optimep(convnet, tmp_path):
    model, calib = convnet
    out = tmp_path / "net.int8.onnx"
    r = invoke(model, "-o", out, "--calib", calib, "--logits", "logits", "--compare", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert qdq_ops(out) == {"QuantizeLinear", "DequantizeLinear"}
    assert (report["calibration_batches"], report["evaluation_batches"]) == (8, 2)  # 20% held out
    assert report["placement"]["optim_nodes"] == report["placement"]["total_nodes"]
    assert report["placement"]["integer_units"] >= 3
    rows = {row["runtime"]: row for row in report["accuracy"]}
    assert set(rows) == {"OptimEP", "CPU EP"}
    assert rows["OptimEP"]["cosine"] >= MIN_COSINE and rows["OptimEP"]["sqnr_db"] > 20
    assert rows["OptimEP"]["top1"] is not None
    assert "calibrating (minmax): batch 8/8" in r.stderr


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_other_calibration_methods(convnet, tmp_path, method):
    model, calib = convnet
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--method", method, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["method"] == method


def test_int8_activations_and_exclusions(convnet, tmp_path):
    model, calib = convnet
    out = tmp_path / "q.onnx"
    r = invoke(model, "-o", out, "--calib", calib, "--activations", "int8", "--exclude", "Gemm", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["activation_type"] == "int8" and len(report["excluded"]) == 1
    q = onnx.load(str(out))
    qlinear = [n for n in q.graph.node if n.op_type == "QuantizeLinear"]
    assert qlinear and all(q_zero_dtype(q, n) == onnx.TensorProto.INT8 for n in qlinear)


def q_zero_dtype(model, node):
    inits = {t.name: t for t in model.graph.initializer}
    return inits[node.input[2]].data_type


def test_calibration_from_a_function(convnet, tmp_path, monkeypatch):
    model, _ = convnet
    (tmp_path / "mycalib.py").write_text(
        "import numpy as np\n"
        "def batches():\n"
        "    for i in range(5):\n"
        "        yield {'x': np.random.default_rng(i).standard_normal((1, 3, 12, 12)).astype(np.float32)}\n")
    monkeypatch.chdir(tmp_path)
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", "mycalib:batches", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["calibration_batches"] == 4


def test_random_calibration_warns(convnet, tmp_path):
    model, _ = convnet
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib-random", "6", "--input", "x:2x3x12x12")
    assert r.exit_code == 0, r.output
    assert "warning: calibrating on random inputs" in r.stderr


def test_dynamic_quantization_needs_no_calibration(tmp_path):
    model = make_model([N("MatMul", ["x", "w"], ["y"])], {"x": (np.float32, [4, 32])}, ["y"], {"w": rand(RNG, 32, 16)})
    (tmp_path / "mm.onnx").write_bytes(model)
    r = invoke(tmp_path / "mm.onnx", "-o", tmp_path / "q.onnx", "--dynamic", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["mode"] == "dynamic" and report["accuracy"][0]["cosine"] > 0.99


# --- bad input: one sentence, exit 2, no file ---------------------------------------------------------

def _bad_npz(tmp_path, **arrays):
    d = tmp_path / "bad"
    d.mkdir()
    for i in range(3):
        np.savez(d / f"{i}.npz", **arrays)
    return d


@pytest.mark.parametrize("make, says", [
    (lambda t: _bad_npz(t, images=np.zeros((1, 3, 12, 12), np.float32)), "missing ['x']"),
    (lambda t: _bad_npz(t, x=np.zeros((1, 3, 12, 12), np.float64)), "input 'x' is float64, the model expects float32"),
    (lambda t: _bad_npz(t, x=np.zeros((1, 4, 12, 12), np.float32)), "input 'x' dim 1 is 4, the model fixes it at 3"),
    (lambda t: _bad_npz(t, x=np.full((1, 3, 12, 12), np.nan, np.float32)), "contains NaN or infinity"),
    (lambda t: (t / "empty").mkdir() or t / "empty", "holds no .npz files"),
    (lambda t: "nosuchmodule:fn", "cannot load calibration function nosuchmodule:fn"),
])
def test_bad_calibration_data(convnet, tmp_path, make, says):
    model, _ = convnet
    out = tmp_path / "q.onnx"
    r = invoke(model, "-o", out, "--calib", make(tmp_path))
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output
    assert not out.exists()


def test_no_calibration_and_already_quantized(convnet, tmp_path):
    model, calib = convnet
    r = invoke(model, "-o", tmp_path / "q.onnx")
    assert r.exit_code == 2 and "needs calibration data" in r.output
    assert invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib).exit_code == 0
    again = invoke(tmp_path / "q.onnx", "-o", tmp_path / "qq.onnx", "--calib", calib)
    assert again.exit_code == 2 and "is already quantized" in again.output
    assert not (tmp_path / "qq.onnx").exists()


def test_exclude_that_matches_nothing(convnet, tmp_path):
    model, calib = convnet
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--exclude", "LSTM")
    assert r.exit_code == 2 and "--exclude 'LSTM' matches no node" in r.output


def _weight_ranges(path) -> list[tuple[int, int]]:
    """(min, max) of every int8 initializer a DequantizeLinear reads (the weights; biases are int32)."""
    from onnx import numpy_helper

    q = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    ranges = []
    for n in q.graph.node:
        w = inits.get(n.input[0]) if n.op_type == "DequantizeLinear" else None
        if w is not None and w.dtype == np.int8 and w.ndim >= 2:
            ranges.append((int(w.min()), int(w.max())))
    return ranges


def test_seven_bit_weights_lie_in_the_range_avx2_runs_exactly_and_cost_a_little_accuracy(convnet, tmp_path):
    """--weight-bits 7: every weight in [-64, 64], which AVX2's direct u8 x s8 pair kernels run (the step profile
    names them; winograd=0, since Winograd on int16 pairs takes AVX2's 3x3 convolutions first); the accuracy report
    measures the cost against the 8-bit model's."""
    from helpers import step_kernels

    model, calib = convnet
    reports = {}
    for bits in (8, 7):
        out = tmp_path / f"w{bits}.onnx"
        r = invoke(model, "-o", out, "--calib", calib, "--weight-bits", bits, "--json")
        assert r.exit_code == 0, r.output
        reports[bits] = json.loads(r.stdout)
        assert reports[bits]["weight_bits"] == bits
        ranges = _weight_ranges(out)
        assert len(ranges) == 3
        top = 127 if bits == 8 else 64
        assert all(-top <= lo and hi <= top for lo, hi in ranges) and max(max(-lo, hi) for lo, hi in ranges) == top
        kernels = step_kernels(out.read_bytes(), "avx2", winograd="0")
        assert ("conv_gemm_u8s8_avx2_5x16" in kernels) == (bits == 7), kernels
    cos = {bits: reports[bits]["accuracy"][0]["cosine"] for bits in reports}
    assert cos[7] >= MIN_COSINE and cos[7] <= cos[8] + 1e-4
    r = invoke(model, "-o", tmp_path / "w7.onnx", "--calib", calib, "--weight-bits", 7)
    assert r.exit_code == 0 and "7-bit weights" in r.stdout


def test_weight_bits_other_than_8_or_7_are_refused(convnet, tmp_path):
    model, calib = convnet
    r = invoke(model, "-o", tmp_path / "q.onnx", "--calib", calib, "--weight-bits", 6)
    assert r.exit_code == 2 and "'6' is not one of '8', '7'" in r.output


def test_a_cpu_without_vnni_hears_about_seven_bit_weights():
    from optim.optimizer.quantization.quantize import weight_bits_hint

    hint = weight_bits_hint("avx2", 8, integer_units=3)
    assert hint and "--weight-bits 7" in hint and "int16 pairs" in hint
    assert weight_bits_hint("avx512", 8, 3) is not None
    for isa, bits, units in [("avx512vnni", 8, 3), ("amx", 8, 3), ("avxvnni", 8, 3), ("avx2", 7, 3), ("avx2", 8, 0)]:
        assert weight_bits_hint(isa, bits, units) is None, (isa, bits, units)
