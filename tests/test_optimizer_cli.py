"""`optim optimize` through click's runner: the report, --json, -v, pass selection, and every way to
get it wrong (one sentence, exit code 2, no traceback; a broken pass: exit 1, named, nothing written)."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from optimizer_helpers import AddBecomesSub, model, ops
from optim.cli import main
from optim.optimizer import manager
from optim.optimizer.passes import PASSES

RNG = np.random.default_rng(1)


@pytest.fixture(scope="module")
def gelu_file(tmp_path_factory):
    """MatMul + Add (3-D, refused by the Gemm fusion) feeding a written-out GELU, plus an Identity."""
    path = tmp_path_factory.mktemp("models") / "gelu.onnx"
    m = model("""g (float[batch, 4, 16] x) => (float[batch, 4, 16] y) {
    m = MatMul(x, w)
    a = Add(m, b)
    i = Identity(a)
    s = Div(i, sqrt2)
    e = Erf(s)
    u = Add(e, one)
    h = Mul(half, u)
    y = Mul(i, h)
}""", w=RNG.standard_normal((16, 16)).astype(np.float32), b=RNG.standard_normal(16).astype(np.float32),
        sqrt2=np.float32(math.sqrt(2)), one=np.float32(1), half=np.float32(0.5))
    onnx.save_model(m, str(path))
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, ["optimize", *map(str, args)], catch_exceptions=False)


def test_report_shows_the_op_table_passes_sizes_and_proof(gelu_file, tmp_path):
    out = tmp_path / "out.onnx"
    r = invoke(gelu_file, "-o", out, "--no-simplify")
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines()]
    assert ["Gelu", "0", "1", "+1"] in rows and ["Identity", "1", "0", "-1"] in rows and ["total", "8", "3", "-5"] in rows
    assert "simplify (onnxsim): off" in r.output and "opset: 18 -> 20" in r.output
    assert "proof: passed on random (seed 0) inputs (x: float32 3x4x16; x: float32 5x4x16)" in r.output
    assert ops(onnx.load(str(out))) == ["MatMul", "Add", "Gelu"]


def test_json_report(gelu_file, tmp_path):
    r = invoke(gelu_file, "-o", tmp_path / "out.onnx", "--json", "--input", "x:2x4x16")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["nodes_before"] == 8 and data["nodes_after"] == 3 and data["proof"]["passed"]
    assert data["simplify"]["status"] == "used" and data["output"] == str(tmp_path / "out.onnx")
    assert "x: float32 2x4x16" in data["proof_inputs"]


def test_verbose_prints_each_rewrite_and_refusal_with_its_reason(gelu_file, tmp_path):
    r = invoke(gelu_file, "-o", tmp_path / "out.onnx", "--no-simplify", "-v")
    assert r.exit_code == 0, r.output
    assert "fuse_gelu: rewrote Erf -> e: 5 nodes -> Gelu" in r.output
    assert ("matmul_add_to_gemm: refused Add -> a: MatMul input A is 3-D; Gemm needs 2-D "
            "(a Reshape around it would add two nodes)") in r.output


def test_skip_and_only(gelu_file, tmp_path):
    r = invoke(gelu_file, "-o", tmp_path / "skip.onnx", "--no-simplify", "--skip", "fuse_gelu")
    assert r.exit_code == 0 and "Erf" in ops(onnx.load(str(tmp_path / "skip.onnx")))
    r = invoke(gelu_file, "-o", tmp_path / "only.onnx", "--no-simplify", "--only", "remove-identity")
    assert r.exit_code == 0 and ops(onnx.load(str(tmp_path / "only.onnx"))) == ["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"]


@pytest.mark.parametrize("args, message", [
    (["--skip", "gelu"], "no pass named 'gelu' (--skip); passes are fold_constants,"),
    (["--input", "x:2xfour"], "bad --input 'x:2xfour'"),
    (["--input", "y:2x4x16"], "no model input named 'y'"),
])
def test_user_errors_exit_2_with_one_sentence(gelu_file, tmp_path, args, message):
    r = invoke(gelu_file, "-o", tmp_path / "out.onnx", *args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out.onnx").exists()


def test_not_onnx_and_wrong_npz(gelu_file, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("hello")
    r = invoke(bad, "-o", tmp_path / "out.onnx")
    assert r.exit_code == 2 and "is not an ONNX model" in r.output
    npz = tmp_path / "in.npz"
    np.savez(npz, z=np.zeros((1, 4, 16), np.float32))
    r = invoke(gelu_file, "-o", tmp_path / "out.onnx", "--inputs", npz)
    assert r.exit_code == 2 and "the model expects ['x']" in r.output


def test_a_broken_pass_fails_the_proof_by_name_and_keeps_the_old_output(gelu_file, tmp_path, monkeypatch):
    monkeypatch.setattr(manager, "PASSES", (AddBecomesSub,) + PASSES)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    r = invoke(gelu_file, "-o", out, "--no-simplify")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "Error: proof failed: pass 'add_becomes_sub' (round 1) broke the model: output 'y' differs" in r.output
    assert out.read_bytes() == b"old"
