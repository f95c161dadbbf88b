"""`optim doctor` and `optim run` through click's runner: what a user sees, including every way to
get the input wrong (one sentence, exit code 2, no traceback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import helper

from helpers import FLOAT_RTOL, make_model, rand
from optim.ep_plugin import ISAS
from optim.cli import main

N = helper.make_node
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory):
    """Gemm -> Relu -> Gemm with a dynamic batch: fully claimable by OptimEP."""
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    model = make_model(
        [N("Gemm", ["x", "w1", "b1"], ["h"], transB=1), N("Relu", ["h"], ["r"]), N("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
        {"x": (np.float32, ["batch", 12])}, ["y"],
        {"w1": rand(RNG, 20, 12), "b1": rand(RNG, 20), "w2": rand(RNG, 5, 20), "b2": rand(RNG, 5)},
    )
    path.write_bytes(model)
    return path


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory):
    """Relu -> TopK -> Relu: TopK is not an OptimEP op, so it falls back with a reason."""
    path = tmp_path_factory.mktemp("models") / "mixed.onnx"
    model = make_model(
        [N("Relu", ["x"], ["a"]), N("TopK", ["a", "k"], ["v", "i"], axis=-1), N("Relu", ["v"], ["y"])],
        {"x": (np.float32, [3, 10])}, ["y"], {"k": np.array([4], dtype=np.int64)},
    )
    path.write_bytes(model)
    return path


@pytest.fixture(scope="module")
def runtime_reshape_file(tmp_path_factory):
    """Reshape whose target shape is a run-time input: bad values fail inside OptimEP's plan."""
    path = tmp_path_factory.mktemp("models") / "reshape.onnx"
    model = make_model(
        [N("Relu", ["x"], ["a"]), N("Reshape", ["a", "shape"], ["y"], name="the_reshape")],
        {"x": (np.float32, [2, 6]), "shape": (np.int64, [2])}, ["y"],
    )
    path.write_bytes(model)
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_sentence(result, code: int, *fragments: str):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    for f in fragments:
        assert f in result.output, f"{f!r} not in {result.output!r}"


# --- doctor ----------------------------------------------------------------------------------------

def test_doctor_reports_the_loaded_ep_and_the_kernels_it_chose():
    r = invoke("doctor", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["ok"] and report["registered"]
    assert report["api_version"] == 23
    assert report["isa"] in ISAS
    assert any(report["isa"] in k for k in report["kernels"]), report["kernels"]
    assert os.path.exists(report["library"])
    assert {"Conv", "Gemm", "MatMul", "Relu", "MaxPool", "Reshape"} <= set(report["ops"])


def test_doctor_forced_scalar_selects_scalar_kernels():
    report = json.loads(invoke("doctor", "--json", "--isa", "scalar").output)
    assert report["isa"] == "scalar"
    assert all("avx2" not in k for k in report["kernels"])


def test_doctor_exits_1_with_the_cause_when_the_library_cannot_load(tmp_path):
    fake = tmp_path / "liboptim_ep.so"
    fake.write_bytes(b"not a shared library")
    env = dict(os.environ, OPTIM_EP_LIBRARY=str(fake))
    p = subprocess.run([sys.executable, "-m", "optim.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "registered       no" in p.stdout
    assert "OptimEP cannot be used" in p.stderr and str(fake) in p.stderr
    assert "Traceback" not in p.stderr


def test_a_relative_library_override_is_taken_from_the_working_directory(tmp_path):
    installed = Path(json.loads(invoke("doctor", "--json").output)["library"])
    (tmp_path / "lib").mkdir()
    shutil.copy(installed, tmp_path / "lib" / "liboptim_ep.so")
    env = dict(os.environ, OPTIM_EP_LIBRARY="lib/liboptim_ep.so")
    p = subprocess.run([sys.executable, "-m", "optim.cli", "doctor", "--json"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["library"] == str(tmp_path / "lib" / "liboptim_ep.so")


# --- run: happy paths ----------------------------------------------------------------------------------

def test_run_json_reports_full_placement_and_the_error_against_the_cpu_ep(mlp_file):
    r = invoke("run", mlp_file, "--input", "x:7x12", "--compare", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["placement"]["total_nodes"] == 3
    assert out["placement"]["optim_nodes"] == 3
    assert out["placement"]["fallback"] == []
    assert out["outputs"]["y"] == {"shape": [7, 5], "dtype": "float32"}
    assert 0 <= out["max_abs_error"] < 1e-4
    assert out["max_rel_error"] <= FLOAT_RTOL


def test_run_lists_each_refused_node_with_its_reason(mixed_file):
    r = invoke("run", mixed_file)
    assert r.exit_code == 0, r.output
    assert "placement: 2/3 nodes on OptimEP" in r.output
    assert "TopK" in r.output and "op TopK is not implemented by OptimEP" in r.output
    j = json.loads(invoke("run", mixed_file, "--json").output)
    assert [(f["op"], f["reason"]) for f in j["placement"]["fallback"]] == [("TopK", "op TopK is not implemented by OptimEP")]


def test_run_reads_inputs_and_saves_outputs_equal_to_the_cpu_ep(mlp_file, tmp_path):
    x = rand(RNG, 4, 12)
    np.savez(tmp_path / "in.npz", x=x)
    r = invoke("run", mlp_file, "--inputs", tmp_path / "in.npz", "--save", tmp_path / "out.npz")
    assert r.exit_code == 0, r.output
    import onnxruntime as ort

    ref = ort.InferenceSession(str(mlp_file), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["y"], ref, rtol=FLOAT_RTOL, atol=1e-5)


@pytest.mark.parametrize("isa", ["scalar", "avx2"])
def test_run_isa_option_reaches_the_kernels(mlp_file, isa):
    out = json.loads(invoke("run", mlp_file, "--input", "x:2x12", "--isa", isa, "--json").output)
    assert out["placement"]["isa"] == isa


# --- run: bad input --------------------------------------------------------------------------------------

def test_run_missing_file(tmp_path):
    assert_one_sentence(invoke("run", tmp_path / "nope.onnx"), 2, "does not exist")


def test_run_file_that_is_not_onnx(tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("hello, I am not a model")
    assert_one_sentence(invoke("run", bad), 2, "is not an ONNX model")


@pytest.mark.parametrize("spec, says", [
    ("x", "expected NAME:DIMS"),
    ("x:3xa", "dimensions must be integers"),
    ("x:-1x12", "dimensions must be >= 0"),
])
def test_run_bad_shape_string(mlp_file, spec, says):
    assert_one_sentence(invoke("run", mlp_file, "--input", spec), 2, says)


def test_run_wrong_input_name(mlp_file):
    assert_one_sentence(invoke("run", mlp_file, "--input", "images:1x12"), 2, "no model input named 'images'", "inputs are x")


def test_run_dynamic_dims_need_a_shape(mlp_file):
    assert_one_sentence(invoke("run", mlp_file), 2, "input 'x' has dynamic dims", "--input x:DIMS")


def test_run_shape_that_contradicts_a_fixed_dim(mlp_file):
    assert_one_sentence(invoke("run", mlp_file, "--input", "x:2x13"), 2, "dim 1 is fixed at 12")


def test_run_npz_with_wrong_names_or_dtype(mlp_file, tmp_path):
    np.savez(tmp_path / "names.npz", images=rand(RNG, 2, 12))
    assert_one_sentence(invoke("run", mlp_file, "--inputs", tmp_path / "names.npz"), 2, "missing ['x']", "unknown ['images']")
    np.savez(tmp_path / "dtype.npz", x=rand(RNG, 2, 12).astype(np.float64))
    assert_one_sentence(invoke("run", mlp_file, "--inputs", tmp_path / "dtype.npz"), 2, "'x' is float64", "expects float32")


def test_run_npz_that_is_not_an_npz(mlp_file, tmp_path):
    (tmp_path / "bad.npz").write_text("nope")
    assert_one_sentence(invoke("run", mlp_file, "--inputs", tmp_path / "bad.npz"), 2, "cannot read inputs from")


def test_run_time_error_inside_optimep_names_the_node_op_and_shapes(runtime_reshape_file, tmp_path):
    np.savez(tmp_path / "in.npz", x=rand(RNG, 2, 6), shape=np.array([5, 5], dtype=np.int64))
    r = invoke("run", runtime_reshape_file, "--inputs", tmp_path / "in.npz")
    assert r.exit_code in (1, 2), r.output
    assert "Traceback" not in r.output
    assert r.output.startswith("Error: OptimEP: node Reshape 'the_reshape' (inputs a:float32[2,6] shape:int64[2]): "
                               "cannot reshape [2,6] (12 elements) to [5,5]"), r.output
    assert len(r.output.strip().splitlines()) == 1
    # The same session still works afterwards with a valid shape.
    np.savez(tmp_path / "ok.npz", x=rand(RNG, 2, 6), shape=np.array([3, 4], dtype=np.int64))
    ok = json.loads(invoke("run", runtime_reshape_file, "--inputs", tmp_path / "ok.npz", "--json").output)
    assert ok["outputs"]["y"]["shape"] == [3, 4]
    assert ok["placement"]["optim_nodes"] == 2


def test_run_model_with_external_data_file(tmp_path):
    """Large models keep their weights in a side file: `optim run` loads them from beside the model."""
    import onnx

    model = onnx.load_from_string(make_model(
        [N("Gemm", ["x", "w"], ["y"], transB=1)], {"x": (np.float32, [2, 64])}, ["y"], {"w": rand(RNG, 256, 64)}))
    path = tmp_path / "big.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="big.onnx.data", size_threshold=0)
    assert (tmp_path / "big.onnx.data").stat().st_size == 256 * 64 * 4
    r = invoke("run", path, "--compare", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["placement"]["optim_nodes"] == 1 and out["max_abs_error"] < 1e-4


# --- precision ---------------------------------------------------------------------------------------

def test_precision_bf16_runs_the_weights_in_bf16_where_the_cpu_has_it_and_is_refused_where_not(mlp_file):
    """--precision bf16 on run and bench: outputs no longer float32's but within bf16 rounding of the CPU EP's
    (run --compare says how far); a CPU (or isa) without a bf16 GEMM gets one sentence, as a bad isa does."""
    from optim.ep_plugin.tools.doctor import bf16_kernel

    if bf16_kernel("auto"):
        r = invoke("run", mlp_file, "--input", "x:4x12", "--precision", "bf16", "--compare", "--json")
        assert r.exit_code == 0, r.output
        out = json.loads(r.output)
        assert out["placement"]["optim_nodes"] == out["placement"]["total_nodes"]
        assert 1e-5 < out["max_abs_error"] < 0.1, out["max_abs_error"]  # bf16 ran: not float32, not garbage
        r = invoke("bench", mlp_file, "--input", "x:4x12", "--runs", "3", "--warmup", "1", "--precision", "bf16")
        assert r.exit_code == 0, r.output
    r = invoke("run", mlp_file, "--input", "x:4x12", "--isa", "avx2", "--precision", "bf16")
    assert_one_sentence(r, 1, "precision=bf16 needs a CPU with AVX512-BF16")
    r = invoke("run", mlp_file, "--input", "x:4x12", "--precision", "fp16")
    assert r.exit_code == 2 and "'fp16' is not one of 'fp32', 'bf16'" in r.output


# --- what --compare compares with ----------------------------------------------------------------------

def test_compare_names_its_reference_and_takes_the_qdq_graph_as_written(tmp_path):
    """A float model against the CPU EP as ONNX Runtime optimizes it; a QDQ model against the CPU EP with graph
    optimizations off (dequantize, float op, quantize: OptimEP's integer units equal that exactly)."""
    from qdq_models import qconv_unit_model

    c = dict(spatial=2, n=1, groups=1, cin_g=4, cout_g=8, kernel=[3, 3], strides=[1, 1], dilations=[1, 1],
             pads=[1, 1, 1, 1], size=[6, 6], x_type="u8", y_type="u8", w_zero=0, relu=False, seed=3)
    qdq = tmp_path / "qdq.onnx"
    qdq.write_bytes(qconv_unit_model(c)[0])
    r = invoke("run", qdq, "--compare", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["reference"] == "ONNX Runtime's CPU EP, graph optimizations off (the QDQ graph as written)"
    assert out["max_abs_error"] <= 1  # within a quantization step of the graph as written (0 where the scales allow)
    r = invoke("run", qdq, "--compare")
    assert "compared with ONNX Runtime's CPU EP, graph optimizations off" in r.output


def test_a_relative_error_that_measures_nothing_says_so(tmp_path):
    """Every reference value within atol of 0: the relative error is n/a, not 0."""
    path = tmp_path / "tiny.onnx"
    path.write_bytes(make_model([N("Mul", ["x", "s"], ["y"])], {"x": (np.float32, [3, 4])}, ["y"],
                                {"s": np.array(1e-7, np.float32)}))
    r = invoke("run", path, "--compare")
    assert r.exit_code == 0, r.output
    assert "compared with ONNX Runtime's CPU EP:" in r.output and "max rel error n/a (every reference value within" in r.output
    out = json.loads(invoke("run", path, "--compare", "--json").output)
    assert out["max_rel_error"] is None and out["checks"][0]["max_rel"] is None


def test_json_output_stays_json_when_the_command_fails(mlp_file, tmp_path):
    """--json promises one JSON object on stdout: a failure gives {"error", "stage", "exit_code"} (the sentence
    still on stderr), for a bad input (exit 2) as for a model that cannot run."""
    r = invoke("run", mlp_file, "--input", "x:2x13", "--json")
    assert r.exit_code == 2
    out = json.loads(r.stdout)
    assert out["stage"] == "run" and out["exit_code"] == 2 and "x" in out["error"]
    r = invoke("quantize", mlp_file, "-o", tmp_path / "q.onnx", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 2 and out["stage"] == "quantize" and "calibration data" in out["error"]
    r = invoke("profile", mlp_file, "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 2 and out["stage"] == "profile" and "dynamic" in out["error"]
