"""`optim export` through click: every input kind from the command line, --json, progress on
stderr, and each bad input ending in exit code 2 and one sentence (a traceback only with -v)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from click.testing import CliRunner

import optimtest_factories as factories
from optim.cli import main
from optim.models import COVERAGE, LLM, REALSIZE

ZOO_NAMES = ", ".join(["mlp", "cnn", "transformer", "minilm", *REALSIZE, *COVERAGE, *LLM])
REPORT_KEYS = {"output", "check", "max_abs", "max_rel", "tolerance", "atol", "rtol", "passed", "problem"}


def optim_export(*args: str):
    return CliRunner().invoke(main, ["export", *map(str, args)])


def assert_one_sentence_error(result, says: str) -> None:
    """Exit code 2, nothing on stdout, and on stderr only progress lines and one 'Error: ' line."""
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines and lines[-1].startswith("Error: "), result.stderr
    assert all(line.startswith("optim: ") for line in lines[:-1]), result.stderr
    assert says in lines[-1], lines[-1]


def _run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


# --- bad inputs: exit 2, one sentence -------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_files(artifacts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    garbage = folder / "garbage.pt"
    garbage.write_bytes(b"this is not a model")
    truncated = folder / "truncated.pt"
    truncated.write_bytes(artifacts["traced"].read_bytes()[:300])
    # A TorchScript archive whose code is damaged: detection finds TorchScript, loading fails.
    damaged = folder / "damaged.pt"
    with zipfile.ZipFile(artifacts["traced"]) as src, zipfile.ZipFile(damaged, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, b"def forward(self, x):\n  return ((" if item.filename.endswith(".py") else data)
    wrong_shape = folder / "wrong_shape.npz"
    np.savez(wrong_shape, x=np.zeros((1, 32), np.float32))
    return {"garbage": garbage, "truncated": truncated, "damaged": damaged, "wrong_shape": wrong_shape}


BAD_INPUTS = {
    "missing file": (["{tmp}/nope.pt"], f"nope.pt does not exist, and it is neither a zoo model ({ZOO_NAMES}) nor a "
                                        f"package.module:factory spec"),
    "not a zip": (["{garbage}", "--input", "x:1x8"], "garbage.pt is not a PyTorch archive (not a zip file): expected a "
                                                     "TorchScript archive (torch.jit.save)"),
    "truncated archive": (["{truncated}", "--input", "x:1x8"],
                          "truncated.pt is a damaged zip archive (truncated: it has no zip directory at its end)"),
    "damaged TorchScript": (["{damaged}", "--input", "x:1x8"],
                            "damaged.pt looks like a TorchScript archive but torch.jit.load failed (expected ident but "
                            "found 'eof' here): it is damaged or from another torch version; save it again"),
    "wrong SPEC": (["not/a spec"], "not/a spec does not exist, and it is neither a zoo model"),
    "unknown module": (["optimtest_no_such_module:build", "--input", "x:1x8"],
                       "cannot import 'optimtest_no_such_module' for optimtest_no_such_module:build (ModuleNotFoundError"),
    "bad --input": (["mlp", "--input", "x:1x0"], "bad --input 'x:1x0': dimension '0' is neither a positive size nor a name"),
    "bad --dynamic": (["mlp", "--dynamic", "x:first"], "bad --dynamic 'x:first': expected NAME:AXIS[:DIM_NAME]"),
    "factory raises": (["optimtest_factories:raises", "--input", "x:1x8"],
                       "Error: factory optimtest_factories:raises raised RuntimeError: weights server unreachable"),
    "factory returns no module": (["optimtest_factories:not_a_module", "--input", "x:1x8"],
                                  "returned a dict, not a torch.nn.Module"),
    "pickled module": (["{pickled}", "--input", "x:1x8"],
                       "is a fully pickled Python object (optimtest_factories.Small) and unpickling it runs arbitrary "
                       "code from the file, so it loads only with --trust-pickle (trust_pickle=True); safer formats: a "
                       "TorchScript archive (torch.jit.save), a torch.export archive (torch.export.save, .pt2), or a "
                       "package.module:factory spec with its state_dict passed as --weights"),
    "state_dict as model": (["{state_dict}", "--input", "x:1x8"], "holds only weights (a state_dict or tensors), not a "
                                                                  "model: give the code that builds the model"),
    "unsupported op": (["optimtest_factories:UsesKthvalue", "--input", "x:2x8"],
                       "the model uses aten.kthvalue in module pool (SecondSmallest), which has no ONNX translation at "
                       "opset 18"),
    "wrong input name": (["mlp", "--input", "y:1x64", "--exporter", "torchscript"],
                         "input 'y' is not a parameter of the model's forward(x): name the inputs after them"),
    "wrong input shape": (["mlp", "--input", "x:1x32", "--exporter", "torchscript"],
                          "the PyTorch model fails on the example inputs (x: 1x32 float32): RuntimeError: mat1 and mat2 "
                          "shapes cannot be multiplied"),
    "wrong example shape": (["mlp", "--example-inputs", "{wrong_shape}"],
                            "example input 'x' has shape 1x32 but the model takes batchx64"),
    "wrong .pt2 input shape": (["{program}", "--input", "x:2x9"], "input 'x' has size 9 on axis 1 but"),
    "missing input shapes": (["optimtest_factories:build"], "does not say what inputs it takes: pass --input NAME:DIMS"),
    "dynamo for TorchScript": (["{traced}", "--input", "x:1x8", "--exporter", "dynamo"],
                               "the dynamo exporter cannot read TorchScript"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_sentence_and_writes_nothing(case, artifacts, bad_files, tmp_path):
    args, says = BAD_INPUTS[case]
    files = {**{k: str(v) for k, v in artifacts.items()}, **{k: str(v) for k, v in bad_files.items()}, "tmp": tmp_path}
    out = tmp_path / "out.onnx"
    result = optim_export(*[a.format(**files) for a in args], "-o", out)
    assert_one_sentence_error(result, says)
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_verbose_shows_the_traceback_with_the_original_error_and_still_exits_2(tmp_path):
    result = optim_export("optimtest_factories:raises", "--input", "x:1x8", "-o", tmp_path / "out.onnx", "-v")
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    # The factory's own exception (hidden behind the one sentence without -v) is in the traceback.
    assert "RuntimeError: weights server unreachable" in result.stderr and 'raise RuntimeError("weights' in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("Error: factory optimtest_factories:raises raised")


def test_click_refuses_a_missing_weights_file_with_exit_2(tmp_path):
    result = optim_export("optimtest_factories:build", "--weights", tmp_path / "w.pt", "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for '--weights': File '{tmp_path / 'w.pt'}' does not exist."


def test_failed_verification_exits_1_with_the_report_and_no_file(tmp_path, onnx_off_by_one):
    out = tmp_path / "small.onnx"
    result = optim_export("optimtest_factories:build", "--input", "x:batchx8", "--exporter", "torchscript", "-o", out)
    assert result.exit_code == 1 and result.stdout == ""  # 1, not 2: the input was fine, the export is wrong
    *progress, first, second, error = result.stderr.splitlines()
    assert all(line.startswith("optim: ") for line in progress)
    for row, check in ((first, "example"), (second, "resized")):
        assert row.split()[:2] == ["output", check] and "max abs 1 " in row and row.endswith("FAILED")
    assert error.startswith("Error: verification against PyTorch failed, so no file was written: output 'output' on the "
                            "example inputs: max abs error 1, ")
    assert "over tolerance float (|diff| <= 0.0001 + 0.0001*|torch|)" in error
    assert "PyTorch's float32 is within the tolerance of float64 and ONNX Runtime is not" in error
    assert error.endswith("to keep the file, loosen the check (--atol 2) or write it unverified (--no-verify)")
    assert list(tmp_path.iterdir()) == []


def test_atol_and_rtol_loosen_the_check(tmp_path, onnx_off_by_one):
    out = tmp_path / "small.onnx"
    result = optim_export("optimtest_factories:build", "--input", "x:1x8", "--exporter", "torchscript", "--atol", "1.5",
                          "--rtol", "0", "--json", "-o", out)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["report"]
    assert row["passed"] and (row["atol"], row["rtol"]) == (1.5, 0.0) and row["tolerance"] == "float (|diff| <= 1.5 + 0*|torch|)"


def test_no_verify_writes_the_file_and_says_it_was_not_checked(tmp_path, onnx_off_by_one):
    out = tmp_path / "small.onnx"
    result = optim_export("optimtest_factories:build", "--input", "x:1x8", "--exporter", "torchscript", "--no-verify",
                          "-o", out)
    assert result.exit_code == 0, result.output
    assert "optim: warning: the file was not verified against PyTorch (--no-verify)" in result.stderr.splitlines()
    assert "  not verified against PyTorch (--no-verify)" in result.stdout.splitlines() and out.exists()
    as_json = optim_export("optimtest_factories:build", "--input", "x:1x8", "--exporter", "torchscript", "--no-verify",
                           "--json", "-o", out)
    data = json.loads(as_json.stdout)
    assert data["verified"] is False and data["report"] == []


# --- every input kind from the command line ---------------------------------------------------------


@pytest.mark.parametrize("kind, file, dims", [("traced", "traced", "batchx8"), ("scripted", "scripted", "batchx4")])
def test_torchscript_file(artifacts, tmp_path, kind, file, dims):
    out = tmp_path / f"{kind}.onnx"
    result = optim_export(artifacts[file], "--input", f"x:{dims}", "-o", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"exported torchscript with the torchscript exporter (opset 18) -> {out}"
    assert [ln.split()[:2] for ln in lines[1:]] == [["output", "example"], ["output", "resized"]]
    assert all(ln.endswith("ok") and "tolerance float (|diff| <= 0.0001" in ln for ln in lines[1:])
    assert f"optim: {artifacts[file]} is a TorchScript archive (told from its contents)" in result.stderr
    assert out.exists()


def test_torch_export_archive_with_json_report(artifacts, tmp_path):
    out = tmp_path / "small.onnx"
    result = optim_export(artifacts["program"], "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # stdout holds the JSON alone; progress went to stderr
    assert (report["kind"], report["exporter"], report["path"]) == ("torch.export", "dynamo", str(out))
    assert report["inputs"] == [{"name": "x", "shape": ["x_dim0", 8], "dtype": "float32"}]
    assert "optim: exporting with the dynamo exporter (opset 18)" in result.stderr
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), factories.build()(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_factory_with_weights(tmp_path):
    model = factories.Small().eval()
    with torch.no_grad():
        model.fc.weight.copy_(torch.linspace(-1, 1, 32).reshape(4, 8))
    weights = tmp_path / "weights.pt"
    torch.save(model.state_dict(), weights)
    out = tmp_path / "small.onnx"
    result = optim_export("optimtest_factories:build", "--weights", weights, "--input", "x:batchx8",
                          "--exporter", "torchscript", "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"exported factory with the torchscript exporter (opset 18) -> {out}")
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), model(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_pickled_module_with_trust_pickle(artifacts, tmp_path):
    result = optim_export(artifacts["pickled"], "--trust-pickle", "--input", "x:1x8", "--exporter", "torchscript",
                          "-o", tmp_path / "p.onnx", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "pickled module"


def test_example_inputs_dynamic_and_opset(tmp_path):
    examples = tmp_path / "x.npz"
    np.savez(examples, x=np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    out = tmp_path / "small.onnx"
    result = optim_export("optimtest_factories:build", "--example-inputs", examples, "--dynamic", "x:0:batch",
                          "--opset", "17", "--exporter", "torchscript", "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inputs"] == [{"name": "x", "shape": ["batch", 8], "dtype": "float32"}] and report["opset"] == 17
    assert next(o.version for o in onnx.load(str(out)).opset_import if o.domain in ("", "ai.onnx")) == 17
    assert "resized inputs (x: 5x8 float32)" in result.stderr  # the second check grew the dynamic axis


def test_zoo_model_default_exporter_json_fields(tmp_path):
    out = tmp_path / "mlp.onnx"
    result = optim_export("mlp", "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"path", "kind", "exporter", "opset", "inputs", "outputs", "report", "baked_args",
                           "verified"}
    assert (report["path"], report["kind"], report["exporter"], report["opset"]) == (str(out), "zoo", "dynamo", 18)
    assert report["verified"] is True
    assert report["inputs"] == [{"name": "x", "shape": ["batch", 64], "dtype": "float32"}]
    assert report["outputs"] == [{"name": "output", "shape": ["batch", 10], "dtype": "float32"}]
    assert [(r["output"], r["check"], r["passed"]) for r in report["report"]] == [
        ("output", "example", True), ("output", "resized", True)]
    for row in report["report"]:
        assert set(row) == REPORT_KEYS
        assert row["max_abs"] < row["atol"] and (row["atol"], row["rtol"]) == (1e-4, 1e-4)
    stderr = result.stderr.splitlines()
    assert stderr == ["optim: loading mlp", "optim: mlp is a zoo model", "optim: exporting with the dynamo exporter (opset 18)",
                      "optim: verifying against PyTorch on ONNX Runtime's CPU EP: example inputs (x: 1x64 float32)",
                      "optim: verifying against PyTorch on ONNX Runtime's CPU EP: resized inputs (x: 2x64 float32)"]
