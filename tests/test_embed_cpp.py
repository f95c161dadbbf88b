"""examples/cpp/optim_host, a C++ application embedding ONNX Runtime (the onnxruntime wheel's library) that
registers OptimEP by path: built with CMake, run on a model, its outputs equal optim.session()'s bit for bit;
ONNX Runtime's message and exit code 1 on a bad model or option."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import optim
from embed_helpers import ROOT, mixed_model, ort_include_dir, run_checked

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    build = tmp_path_factory.mktemp("host-build")
    run_checked(["cmake", "-S", ROOT / "examples" / "cpp", "-B", build, f"-DPython_EXECUTABLE={sys.executable}",
                 f"-DORT_INCLUDE_DIR={ort_include_dir()}"])
    run_checked(["cmake", "--build", build, "-j1"])
    return build / "optim_host"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mixed.onnx"
    path.write_bytes(mixed_model())
    return path


def test_host_outputs_equal_python_session(host, model, tmp_path):
    x = np.random.default_rng(3).standard_normal((4, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    out.mkdir()
    done = run_checked([host, model, "--ep-library", optim.library_path(), "--input", f"x={tmp_path / 'x.npy'}",
                        "--threads", "1", "--save-outputs", out])
    sess = optim.session(model, threads=1)
    y, i = sess.run(None, {"x": x})
    np.testing.assert_array_equal(np.load(out / "y.npy"), y)
    np.testing.assert_array_equal(np.load(out / "i.npy"), i)
    lines = done.stdout.splitlines()
    assert "OptimEP device: vendor optim, hardware CPU" in lines
    assert f"output y: float [4,5] first: {' '.join(f'{v:.6g}' for v in y.ravel()[:6])} ... sum: " in done.stdout
    nodes = [line for line in lines if line.startswith("node ")]
    assert "node topk (TopK) ran on CPUExecutionProvider" in nodes
    assert sum(line.endswith("ran on OptimEP") for line in nodes) == 2  # Gemm+Relu, then Relu


def test_host_random_inputs_and_ep_options(host, model):
    done = run_checked([host, model, "--ep-library", optim.library_path(), "--dim", "3", "--ep-option", "isa=scalar"])
    assert "input x: float [3,12] (random)" in done.stdout
    assert "output i: int64 [3,5]" in done.stdout


@pytest.mark.parametrize("case, args, message", [
    ("bad model", [], "Protobuf parsing failed"),
    ("bad option", ["--ep-option", "isa=bogus"], "option isa='bogus' is not one of"),
    ("no fallback", ["--no-fallback"], "fallback to CPU EP has been explicitly disabled"),
])
def test_host_reports_onnxruntime_errors(host, model, tmp_path, case, args, message):
    target = model
    if case == "bad model":
        target = tmp_path / "bad.onnx"
        target.write_bytes(b"not a model")
    done = subprocess.run([host, target, "--ep-library", optim.library_path(), *args], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "optim_host: ONNX Runtime error: " in done.stderr and message in done.stderr, done.stderr


def test_host_usage_error(host):
    done = subprocess.run([host, "model.onnx"], capture_output=True, text=True)
    assert done.returncode == 2 and "--ep-library PATH is required" in done.stderr
