"""`optim export` with non-tensor arguments: `--arg NAME=VALUE` bakes a Python int/float/bool argument of
forward into the graph; `--input NAME=VALUE[:DTYPE]` makes a 0-d tensor input with that example value. Both
on a TorchScript archive whose forward takes (x, sr) and on a Python module (dynamo exporter)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest
import torch

import optimtest_factories as factories
from optim.ep_plugin import cpu_session, placement, session
from optim.exporter import InputSpec, parse_input_spec
from optim.exporter.baked_args import parse_arg
from test_cli_export import assert_one_sentence_error, optim_export

X = np.random.default_rng(3).standard_normal((1, 1, 64)).astype(np.float32)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """TorchScript archives: forward(x, sr: int) and forward(x, sr: Tensor)."""
    folder = tmp_path_factory.mktemp("sample_rate")
    files = {"int": folder / "sr_int.pt", "tensor": folder / "sr_tensor.pt"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(factories.sample_rate_switch()), files["int"])
        torch.manual_seed(0)
        torch.jit.save(torch.jit.script(factories.SampleRateTensor().eval()), files["tensor"])
    return files


def _torch(module, *args):
    with torch.no_grad():
        return module(torch.from_numpy(X), *args).numpy()


def _inputs(path) -> list[str]:
    return [i.name for i in onnx.load(str(path)).graph.input]


@pytest.mark.parametrize("sr", [16000, 8000])
def test_arg_bakes_an_int_of_a_scripted_forward(scripted, tmp_path, sr):
    out = tmp_path / "m.onnx"
    result = optim_export(scripted["int"], "-o", out, "--input", "x:batchx1x64", "--arg", f"sr={sr}")
    assert result.exit_code == 0, result.output
    assert f"baked into the graph: sr={sr}" in result.stdout
    assert _inputs(out) == ["x"]
    assert "If" not in {n.op_type for n in onnx.load(str(out)).graph.node}  # the branch was decided at export
    expected = _torch(factories.sample_rate_switch(), sr)
    np.testing.assert_allclose(cpu_session(str(out)).run(None, {"x": X})[0], expected, atol=1e-5)


def test_arg_on_a_python_module_goes_through_dynamo(tmp_path):
    out = tmp_path / "m.onnx"
    result = optim_export("optimtest_factories:sample_rate_switch", "-o", out, "--input", "x:1x1x64",
                          "--arg", "sr=8000", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["exporter"] == "dynamo" and report["baked_args"] == {"sr": 8000}
    assert [i["name"] for i in report["inputs"]] == ["x"]
    expected = _torch(factories.sample_rate_switch(), 8000)
    np.testing.assert_allclose(session(str(out)).run(None, {"x": X})[0], expected, atol=1e-5)


def test_scalar_input_becomes_a_0d_input_and_an_if_on_optimep(scripted, tmp_path):
    out = tmp_path / "m.onnx"
    result = optim_export(scripted["tensor"], "-o", out, "--input", "x:1x1x64", "--input", "sr=16000:int64")
    assert result.exit_code == 0, result.output
    model = onnx.load(str(out))
    sr_input = next(i for i in model.graph.input if i.name == "sr")
    assert sr_input.type.tensor_type.elem_type == onnx.TensorProto.INT64 and len(sr_input.type.tensor_type.shape.dim) == 0
    assert "If" in {n.op_type for n in model.graph.node}
    sess = session(str(out))
    p = placement(sess)
    assert [n.op for n in p.fallback] == ["If"], p.summary()  # both branches' nodes run on OptimEP
    torch.manual_seed(0)
    reference = factories.SampleRateTensor().eval()
    for sr in (16000, 8000):
        ours = sess.run(None, {"x": X, "sr": np.array(sr, np.int64)})[0]
        np.testing.assert_allclose(ours, _torch(reference, torch.tensor(sr)), atol=1e-5)


@pytest.mark.parametrize("text, spec", [
    ("sr=16000:int64", InputSpec("sr", (), "int64", {}, 16000)),
    ("sr=16000", InputSpec("sr", (), "int64", {}, 16000)),
    ("gain=0.5", InputSpec("gain", (), "float32", {}, 0.5)),
    ("gain=2:float32", InputSpec("gain", (), "float32", {}, 2)),
    ("on=true", InputSpec("on", (), "bool", {}, True)),
])
def test_scalar_input_specs(text, spec):
    parsed = parse_input_spec(text)
    assert parsed == spec
    assert parse_input_spec(str(parsed)) == parsed


@pytest.mark.parametrize("text, value", [("sr=16000", 16000), ("scale=0.5", 0.5), ("flag=true", True), ("flag=False", False)])
def test_arg_values(text, value):
    assert parse_arg(text) == (text.split("=")[0], value)


@pytest.mark.parametrize("args, says", [
    (["--arg", "sr"], "bad --arg 'sr': expected NAME=VALUE with an int, float or true/false value, e.g. sr=16000"),
    (["--arg", "sr=fast"], "bad --arg 'sr=fast': 'fast' is not an int, a float or true/false"),
    (["--arg", "rate=16000"], "--arg rate: the model's forward(x, sr) has no parameter 'rate'"),
    (["--arg", "sr=0.5"], "--arg sr=0.5: forward declares sr as int, so give an int"),
    (["--arg", "sr=1", "--arg", "sr=2"], "--arg sr is given twice"),
])
def test_bad_args_end_in_one_sentence(scripted, tmp_path, args, says):
    result = optim_export(scripted["int"], "-o", tmp_path / "m.onnx", "--input", "x:1x1x64", *args)
    assert_one_sentence_error(result, says)
    assert not (tmp_path / "m.onnx").exists()


def test_arg_cannot_change_a_torch_export_archive(artifacts, tmp_path):
    result = optim_export(artifacts["program"], "-o", tmp_path / "m.onnx", "--arg", "sr=1")
    assert_one_sentence_error(result, "a torch.export archive fixed its non-tensor arguments when it was exported")


# --- optim optimize --freeze: the exported If decided ------------------------------------------------------


@pytest.fixture(scope="module")
def with_if(scripted, tmp_path_factory):
    out = tmp_path_factory.mktemp("freeze") / "sr.onnx"
    result = optim_export(scripted["tensor"], "-o", out, "--input", "x:1x1x64", "--input", "sr=16000:int64")
    assert result.exit_code == 0, result.output
    return out


def optim_optimize(*args):
    from click.testing import CliRunner

    from optim.cli import main

    return CliRunner().invoke(main, ["optimize", *map(str, args)])


@pytest.mark.parametrize("sr, branch", [(16000, "then"), (8000, "else")])
def test_freeze_folds_the_if_the_input_decides(with_if, tmp_path, sr, branch):
    out = tmp_path / "frozen.onnx"
    result = optim_optimize(with_if, "-o", out, "--freeze", f"sr={sr}", "-v")
    assert result.exit_code == 0, result.output
    assert f"inline_constant_if: rewrote /If: its condition is {sr == 16000}: the {branch} branch's" in result.stdout
    assert f"frozen (no longer inputs): sr={sr}" in result.stdout.splitlines()
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["x"] and "If" not in {n.op_type for n in model.graph.node}
    sess = session(str(out))
    assert placement(sess).fallback == []  # the If kept its branch on the CPU EP; now every node runs on OptimEP
    torch.manual_seed(0)
    reference = factories.SampleRateTensor().eval()
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], _torch(reference, torch.tensor(sr)), atol=1e-5)


@pytest.mark.parametrize("args, says", [
    (["--freeze", "sr=abc"], "--freeze sr=abc: 'abc' is not a number"),
    (["--freeze", "rate=1"], "--freeze rate: the model has no input 'rate'; inputs are x, sr"),
    (["--freeze", "sr=1.5"], "--freeze sr=1.5: input 'sr' is int64; give a whole number"),
    (["--freeze", "sr"], "--freeze 'sr' is not NAME=VALUE (e.g. sr=16000)"),
    (["--input", "sr=16000"], "--input sr=16000 gives a value, not a shape; --freeze sr=16000 fixes an input to a value"),
])
def test_bad_freezes_end_in_one_sentence(with_if, tmp_path, args, says):
    result = optim_optimize(with_if, "-o", tmp_path / "m.onnx", *args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr.splitlines()[-1]
    assert not (tmp_path / "m.onnx").exists()
