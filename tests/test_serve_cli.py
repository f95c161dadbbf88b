"""`optim serve` on the command line: its help, a bad model path or file in one sentence (exit 2), and the real
command serving a model repository to tritonclient until SIGINT stops it gracefully, on its own server and with
--ray. Also model repositories (optim.serve.model_files): NAME.onnx files, Triton's NAME/VERSION/model.onnx, clashes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton
from click.testing import CliRunner

from helpers import assert_close
from optim.cli import main
from optim.serve import ModelLoadError, model_files
from serve_helpers import direct, mlp_model, write_repository

START_TIMEOUT_S = 120.0  # the subprocess imports onnxruntime and FastAPI (or starts Ray) and opens the sessions
STOP_TIMEOUT_S = 60.0


def test_help_names_the_protocol_and_the_options():
    done = CliRunner().invoke(main, ["serve", "--help"])
    assert done.exit_code == 0
    output = " ".join(done.output.split())  # click wraps the text
    for text in ("KServe v2", "--max-batch", "--max-delay-ms", "--max-queue", "--timeout-s", "--threads", "--ray",
                 "--replicas", "/v2/models/NAME/infer", "repository folders"):
        assert text in output, text


@pytest.mark.parametrize("make, message", [
    (lambda folder: folder / "missing.onnx", "Path '{path}' does not exist."),
    (lambda folder: (folder / "junk.onnx").write_text("not a model") and folder / "junk.onnx", "{path} cannot be loaded: "),
    (lambda folder: (folder / "empty").mkdir() or folder / "empty",
     "{path} holds no models: expected NAME.onnx files or NAME/1/model.onnx folders"),
])
def test_a_bad_model_path_is_one_sentence(tmp_path, make, message):
    path = make(tmp_path)
    done = CliRunner().invoke(main, ["serve", str(path)])
    assert done.exit_code == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message.format(path=path) in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Serve's modules warn about pydantic's on import
def test_ray_checks_the_models_before_starting_ray(tmp_path):
    (tmp_path / "empty").mkdir()
    done = CliRunner().invoke(main, ["serve", str(tmp_path / "empty"), "--ray"])
    assert done.exit_code == 2
    assert f"Error: {tmp_path / 'empty'} holds no models" in done.stderr


def test_model_repository_layouts(tmp_path):
    (tmp_path / "a.onnx").write_bytes(mlp_model())
    for version in ("1", "3", "10"):
        (tmp_path / "b" / version).mkdir(parents=True)
        (tmp_path / "b" / version / "model.onnx").write_bytes(mlp_model())
    (tmp_path / "notes").mkdir()
    assert model_files([tmp_path]) == {"a": (tmp_path / "a.onnx", "1"), "b": (tmp_path / "b" / "10" / "model.onnx", "10")}
    with pytest.raises(ModelLoadError, match="two models are named 'a'"):
        model_files([tmp_path, tmp_path / "a.onnx"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_until_sigint(repo: Path, *options: str) -> str:
    """`optim serve repo OPTIONS` on a free port: waits until model mlp is ready, checks one inference against the
    direct session, sends SIGINT, asserts exit code 0; returns stderr."""
    port = free_port()
    optim = Path(sys.executable).with_name("optim")
    process = subprocess.Popen([optim, "serve", repo, "--port", str(port), "--threads", "1", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        client = triton.InferenceServerClient(f"127.0.0.1:{port}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, process.communicate()
            try:
                if client.is_model_ready("mlp"):
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            assert time.monotonic() < deadline, "optim serve did not start"
            time.sleep(0.2)
        x = np.random.default_rng(5).standard_normal((2, 32)).astype(np.float32)
        tensor = triton.InferInput("x", [2, 32], "FP32")
        tensor.set_data_from_numpy(x)
        assert_close(client.infer("mlp", [tensor]).as_numpy("y"), direct(repo / "mlp.onnx", {"x": x})["y"])
        client.close()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=STOP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    return stderr.replace(str(port), "PORT")


def test_the_command_serves_until_sigint(tmp_path):
    stderr = serve_until_sigint(write_repository(tmp_path / "repo"), "--max-batch", "4")
    assert "serving fixed, mlp, tokens on http://127.0.0.1:PORT" in stderr


@pytest.mark.ray
def test_the_command_on_ray_serves_until_sigint(tmp_path):
    # Starts a local Ray instance in the child (20-40 s on 2 cores); one model keeps it short.
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "mlp.onnx").write_bytes(mlp_model())
    serve_until_sigint(folder, "--ray", "--max-batch", "4")
