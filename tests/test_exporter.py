"""optim.exporter: artifact detection and loading, input specs, the exporters, verification, errors.

Most exports here use the TorchScript exporter (a tenth of a second) where the test is not about
the exporter choice; the dynamo exporter costs seconds per model.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
import textwrap
import warnings
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from optim.exporter import (
    DYNAMIC_EXAMPLE_SIZE,
    ExportError,
    InputSpec,
    detect_kind,
    export,
    parse_input_spec,
)

FACTORIES = "optimtest_factories"

# Test models, in a real importable module: factory specs and unpickling need one.
FACTORIES_SOURCE = '''
from typing import NamedTuple

import torch
from torch import nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def build():
    torch.manual_seed(0)
    return Small().eval()


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = self.fc(x)
        return {"logits": h, "features": torch.tanh(h)}


def two_heads():
    torch.manual_seed(0)
    return TwoHeads().eval()


class Pair(nn.Module):
    def forward(self, x):
        return x + 1, x * 2


class DataDependentBranch(nn.Module):
    """torch.export cannot capture a Python `if` on tensor values; tracing follows one branch."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class LoopAndBranch(nn.Module):
    """Data-dependent control flow: only scripting (not tracing) keeps it."""

    def forward(self, x):
        y = x
        for _ in range(x.shape[0]):
            y = y * 0.5 + 1.0
        if bool(x.sum() > 0):
            y = y + 1.0
        else:
            y = y - 1.0
        return y


@torch.library.custom_op("optimtest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


class UsesCustomOp(nn.Module):
    def forward(self, x):
        return twice(x) + 1


def raises():
    raise RuntimeError("weights server unreachable")


def not_a_module():
    return {"fc": 1}


NOT_CALLABLE = 42
'''


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
    folder = tmp_path_factory.mktemp("factories")
    (folder / f"{FACTORIES}.py").write_text(textwrap.dedent(FACTORIES_SOURCE))
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(FACTORIES)
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def artifacts(factories, tmp_path_factory):
    """One file of each kind PyTorch writes, all from the Small model (x: Nx8)."""
    folder = tmp_path_factory.mktemp("artifacts")
    model = factories.build()
    x = torch.randn(2, 8)
    files = {
        "traced": folder / "traced.pt",
        "scripted": folder / "scripted.pt",
        "program": folder / "small.pt2",
        "state_dict": folder / "state_dict.pt",
        "pickled": folder / "pickled.pt",
    }
    with warnings.catch_warnings():  # torch 2.13 calls TorchScript deprecated; users still have such files
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.trace(model, x), files["traced"])
        torch.jit.save(torch.jit.script(factories.LoopAndBranch()), files["scripted"])
    batch = torch.export.Dim("batch")
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}}), files["program"])
    torch.save(model.state_dict(), files["state_dict"])
    torch.save(model, files["pickled"])
    return files


def _run_onnx(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _dims(path, input_index=0):
    value = onnx.load(str(path)).graph.input[input_index]
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


# --- input specs ---------------------------------------------------------------------------------


def test_parse_input_spec_reads_sizes_names_and_dtypes():
    assert parse_input_spec("x:1x3x224x224") == InputSpec("x", (1, 3, 224, 224), "float32", {})
    ids = parse_input_spec("ids:batchx128:int64")
    assert ids == InputSpec("ids", (DYNAMIC_EXAMPLE_SIZE, 128), "int64", {0: "batch"})
    assert ids.dims() == ["batch", 128] and str(ids) == "ids:batchx128:int64"
    # Commas separate dims when a dim name contains an "x".
    assert parse_input_spec("ids:1,max_len:int64").dynamic == {1: "max_len"}


@pytest.mark.parametrize("text, says", [
    ("x", "expected NAME:DIMS"),
    ("x:", "expected NAME:DIMS"),
    (":1x3", "expected NAME:DIMS"),
    ("x:1x3:int64:more", "expected NAME:DIMS"),
    ("x:1x0x3", "dimension '0' is neither a positive size nor a name"),
    ("x:1x-1", "dimension '-1'"),
    ("x:1x$x3", "dimension '$'"),
    ("x:1xx3", "dimension ''"),
    ("x:1x3:float8", "dtype 'float8' is not one of float32"),
])
def test_bad_input_specs_raise_one_sentence_naming_the_problem(text, says):
    with pytest.raises(ExportError) as info:
        parse_input_spec(text)
    message = str(info.value)
    assert message.startswith(f"bad --input {text!r}: ") and says in message and "\n" not in message
    assert isinstance(info.value, ValueError)


@settings(max_examples=60, deadline=None)
@given(
    dims=st.lists(st.one_of(st.integers(1, 4096), st.sampled_from(["batch", "seq", "N", "h_w"])), min_size=0, max_size=5),
    dtype=st.sampled_from(["float32", "int64", "bool", "uint8"]),
)
def test_input_spec_text_round_trips(dims, dtype):
    spec = parse_input_spec(f"t:{'x'.join(map(str, dims)) or '1'}:{dtype}")
    assert parse_input_spec(str(spec)) == spec
    assert spec.dims() == (dims or [1])


# --- artifact detection ----------------------------------------------------------------------------


def test_detect_kind_reads_the_contents_not_the_name(artifacts, tmp_path):
    assert detect_kind(artifacts["traced"]) == ("torchscript", "")
    assert detect_kind(artifacts["scripted"]) == ("torchscript", "")
    assert detect_kind(artifacts["program"]) == ("torch.export", "")
    assert detect_kind(artifacts["state_dict"]) == ("state_dict", "")
    assert detect_kind(artifacts["pickled"]) == ("pickle", f"{FACTORIES}.Small")
    renamed = tmp_path / "model.onnx"
    renamed.write_bytes(artifacts["program"].read_bytes())
    assert detect_kind(renamed) == ("torch.export", "")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ExportError, match="nope.pt does not exist, and it is neither a zoo model"):
        export(str(tmp_path / "nope.pt"), tmp_path / "out.onnx", inputs=["x:1x8"])


@pytest.mark.parametrize("content, says", [
    (b"definitely not a model", "is not a PyTorch archive (not a zip file)"),
    (b"PK\x03\x04 truncated zip", "is not a PyTorch archive"),
])
def test_garbage_file_is_refused(tmp_path, content, says):
    garbage = tmp_path / "model.pt"
    garbage.write_bytes(content)
    with pytest.raises(ExportError, match=re.escape(says)):
        export(str(garbage), tmp_path / "out.onnx", inputs=["x:1x8"])
    assert not (tmp_path / "out.onnx").exists()


def test_foreign_zip_is_refused(tmp_path):
    archive = tmp_path / "model.pt"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(ExportError, match="zip archive but not one PyTorch wrote"):
        export(str(archive), tmp_path / "out.onnx", inputs=["x:1x8"])


# --- sources ---------------------------------------------------------------------------------------


def test_traced_torchscript_exports_with_the_torchscript_exporter(artifacts, factories, tmp_path):
    out = tmp_path / "traced.onnx"
    result = export(str(artifacts["traced"]), out, inputs=["x:batchx8"])
    assert (result.kind, result.exporter) == ("torchscript", "torchscript")
    assert [(r["check"], r["passed"]) for r in result.report] == [("example", True), ("resized", True)]
    assert _dims(out) == ["batch", 8]
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_allclose(_run_onnx(out, {"x": x})[0], factories.build()(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_scripted_control_flow_survives_as_loop_and_if(artifacts, tmp_path):
    out = tmp_path / "scripted.onnx"
    result = export(str(artifacts["scripted"]), out, inputs=["x:batchx4"])
    assert result.exporter == "torchscript" and result.passed
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert {"Loop", "If"} <= ops
    # The loop count follows the batch size and the branch the sign of the sum: check both ways.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.load(str(artifacts["scripted"]))
    for x in (np.full((3, 4), 0.5, np.float32), np.full((1, 4), -0.5, np.float32)):
        np.testing.assert_allclose(_run_onnx(out, {"x": x})[0], scripted(torch.from_numpy(x)).numpy(), rtol=1e-6)


@pytest.mark.slow
def test_auto_falls_back_to_torchscript_and_warns_about_traced_branches(factories, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="optim.exporter")
    result = export(f"{FACTORIES}:DataDependentBranch", tmp_path / "branch.onnx", inputs=["x:2x3"])
    assert result.exporter == "torchscript" and result.passed
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("the dynamo exporter failed (") and m.endswith("trying the torchscript exporter") for m in messages)
    assert any("tracer followed Python control flow" in m for m in messages)


def test_dynamo_refuses_torchscript_and_says_what_to_use(artifacts, tmp_path):
    with pytest.raises(ExportError, match="dynamo exporter cannot read TorchScript.*--exporter torchscript"):
        export(str(artifacts["traced"]), tmp_path / "out.onnx", inputs=["x:1x8"], exporter="dynamo")


@pytest.mark.slow
def test_torch_export_archive_brings_its_own_inputs_and_dynamic_axes(artifacts, tmp_path):
    out = tmp_path / "program.onnx"
    result = export(str(artifacts["program"]), out)  # no inputs: the archive has examples and axes
    assert (result.kind, result.exporter) == ("torch.export", "dynamo")
    assert result.inputs == [{"name": "x", "shape": ["x_dim0", 8], "dtype": "float32"}]
    assert {r["check"] for r in result.report} == {"example", "resized"} and result.passed
    # The caller may name the archive's dynamic axes, not add new ones.
    assert export(str(artifacts["program"]), out, inputs=["x:batchx8"]).inputs[0]["shape"] == ["batch", 8]
    with pytest.raises(ExportError, match="input 'x' axis 1 is static in .*small.pt2"):
        export(str(artifacts["program"]), out, inputs=["x:2xfeatures"])


def test_factory_spec_exports_and_takes_weights(factories, tmp_path):
    out = tmp_path / "factory.onnx"
    result = export(f"{FACTORIES}:build", out, inputs=["x:batchx8"], exporter="torchscript")
    assert (result.kind, result.exporter) == ("factory", "torchscript") and result.passed

    other = factories.Small()
    with torch.no_grad():
        other.fc.weight.fill_(0.25)
    weights = tmp_path / "weights.pt"
    torch.save(other.state_dict(), weights)
    export(f"{FACTORIES}:build", out, inputs=["x:batchx8"], weights=str(weights), exporter="torchscript")
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(_run_onnx(out, {"x": x})[0], other.eval()(torch.from_numpy(x)).detach().numpy(), rtol=1e-6)


def test_weights_that_do_not_fit_are_refused(factories, tmp_path):
    weights = tmp_path / "weights.pt"
    torch.save({"fc.weight": torch.zeros(4, 3), "fc.bias": torch.zeros(4)}, weights)
    with pytest.raises(ExportError, match="do not fit optimtest_factories:build: .*size mismatch"):
        export(f"{FACTORIES}:build", tmp_path / "out.onnx", inputs=["x:1x8"], weights=str(weights))
    torch.save({"encoder.weight": torch.zeros(4, 8)}, weights)
    with pytest.raises(ExportError, match="missing fc.weight, fc.bias, unexpected encoder.weight"):
        export(f"{FACTORIES}:build", tmp_path / "out.onnx", inputs=["x:1x8"], weights=str(weights))


def test_pickled_module_is_refused_without_trust_pickle_and_loads_with_it(artifacts, tmp_path):
    out = tmp_path / "pickled.onnx"
    with pytest.raises(ExportError) as info:
        export(str(artifacts["pickled"]), out, inputs=["x:1x8"])
    message = str(info.value)
    for phrase in ("fully pickled Python object (optimtest_factories.Small)", "runs arbitrary code",
                   "--trust-pickle", "TorchScript archive (torch.jit.save)", "torch.export archive", "--weights"):
        assert phrase in message
    assert not out.exists()
    result = export(str(artifacts["pickled"]), out, inputs=["x:1x8"], trust_pickle=True, exporter="torchscript")
    assert result.kind == "pickled module" and result.passed and out.exists()


def test_state_dict_given_as_model_points_to_weights(artifacts, tmp_path):
    with pytest.raises(ExportError, match="holds only weights .*package.module:factory .*--weights"):
        export(str(artifacts["state_dict"]), tmp_path / "out.onnx", inputs=["x:1x8"])


@pytest.mark.parametrize("spec, says", [
    ("optimtest_no_such_module:build", "cannot import 'optimtest_no_such_module' .*ModuleNotFoundError"),
    (f"{FACTORIES}:missing", "has no attribute 'missing'"),
    (f"{FACTORIES}:NOT_CALLABLE", "is a int, not a callable"),
    (f"{FACTORIES}:raises", "factory optimtest_factories:raises raised RuntimeError: weights server unreachable"),
    (f"{FACTORIES}:not_a_module", "returned a dict, not a torch.nn.Module"),
])
def test_bad_factory_specs_say_what_went_wrong(factories, tmp_path, spec, says):
    with pytest.raises(ExportError, match=says):
        export(spec, tmp_path / "out.onnx", inputs=["x:1x8"])
    assert not (tmp_path / "out.onnx").exists()


def test_misused_arguments_are_refused(artifacts, tmp_path):
    with pytest.raises(ExportError, match="--weights applies to module:factory specs; .* is a torchscript file"):
        export(str(artifacts["traced"]), tmp_path / "out.onnx", inputs=["x:1x8"], weights=str(artifacts["state_dict"]))
    with pytest.raises(ExportError, match="exporter 'onnx' is not one of auto, dynamo, torchscript"):
        export("mlp", tmp_path / "out.onnx", exporter="onnx")
    with pytest.raises(ExportError, match="is a directory: give a file name"):
        export("mlp", tmp_path, exporter="torchscript")
    with pytest.raises(ExportError, match="the TorchScript exporter cannot take a torch.export archive"):
        export(str(artifacts["program"]), tmp_path / "out.onnx", exporter="torchscript")


# --- inputs and outputs ------------------------------------------------------------------------------


def test_wrong_input_name_shape_or_dtype_names_the_input(tmp_path):
    out = tmp_path / "mlp.onnx"
    with pytest.raises(ExportError, match=r"input 'y' is not a parameter of the model's forward\(x\)"):
        export("mlp", out, inputs=["y:1x64"], exporter="torchscript")
    with pytest.raises(ExportError, match=r"fails on the example inputs \(x: 1x32 float32\): RuntimeError: mat1 and mat2"):
        export("mlp", out, inputs=["x:1x32"], exporter="torchscript")
    with pytest.raises(ExportError, match="example input 'x' has shape 1x32 but the model takes batchx64"):
        export("mlp", out, example_inputs={"x": np.zeros((1, 32), np.float32)}, exporter="torchscript")
    with pytest.raises(ExportError, match=r"example input 'x' is float64 but the model takes float32: convert it"):
        export("mlp", out, example_inputs={"x": np.zeros((1, 64))}, exporter="torchscript")
    with pytest.raises(ExportError, match="--dynamic names input 'z', but the inputs are x"):
        export("mlp", out, dynamic=["z:0"], exporter="torchscript")
    with pytest.raises(ExportError, match="does not say what inputs it takes: pass --input NAME:DIMS"):
        export(f"{FACTORIES}:build", out)
    assert not out.exists()


def test_example_inputs_npz_and_dynamic_strings(factories, tmp_path):
    examples = tmp_path / "inputs.npz"
    np.savez(examples, x=np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    out = tmp_path / "small.onnx"
    result = export(f"{FACTORIES}:build", out, example_inputs=str(examples), dynamic=["x:0:batch"], exporter="torchscript")
    assert result.inputs == [{"name": "x", "shape": ["batch", 8], "dtype": "float32"}]
    assert [r["check"] for r in result.report] == ["example", "resized"]
    json.dumps(result.to_dict())  # the CLI's --json
    # dynamic={} makes a zoo model static.
    assert export("mlp", out, dynamic={}, exporter="torchscript").inputs[0]["shape"] == [1, 64]
    with pytest.raises(ExportError, match="bad --dynamic 'x:zero'"):
        export(f"{FACTORIES}:build", out, example_inputs=str(examples), dynamic=["x:zero"])
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    with pytest.raises(ExportError, match="are not a readable .npz file"):
        export(f"{FACTORIES}:build", out, example_inputs=str(bad))


def test_output_names_come_from_the_model(factories, tmp_path):
    result = export(f"{FACTORIES}:two_heads", tmp_path / "heads.onnx", inputs=["x:1x8"], exporter="torchscript")
    assert [o["name"] for o in result.outputs] == ["logits", "features"]
    assert [r["output"] for r in result.report] == ["logits", "features"]
    result = export(f"{FACTORIES}:Pair", tmp_path / "pair.onnx", inputs=["x:1x8"], exporter="torchscript")
    assert [o["name"] for o in result.outputs] == ["output_0", "output_1"]


# --- exporter errors and verification ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("exporter, op, fix", [
    ("dynamo", "optimtest.twice", "--exporter torchscript"),
    ("torchscript", "optimtest::twice", "--exporter dynamo"),
])
def test_unsupported_op_is_named_with_the_fixes(factories, tmp_path, exporter, op, fix):
    with pytest.raises(ExportError) as info:
        export(f"{FACTORIES}:UsesCustomOp", tmp_path / "out.onnx", inputs=["x:1x8"], exporter=exporter)
    message = str(info.value)
    assert f"the model uses {op}, which has no ONNX translation at opset 18" in message
    assert fix in message and "another --opset" in message
    assert list(tmp_path.iterdir()) == []


def test_failed_verification_leaves_no_file_and_keeps_the_old_one(factories, tmp_path, monkeypatch):
    out = tmp_path / "small.onnx"
    out.write_bytes(b"previous export")

    class OffByOne(ort.InferenceSession):  # simulates an exporter bug: every output is 1 off
        def run(self, names, feeds, *args, **kwargs):
            return [o + 1 for o in super().run(names, feeds, *args, **kwargs)]

    monkeypatch.setattr(ort, "InferenceSession", OffByOne)
    with pytest.raises(ExportError, match="verification against PyTorch failed, so no file was written: output 'output' "
                                          "on the example inputs: max abs error 1, ") as info:
        export(f"{FACTORIES}:build", out, inputs=["x:batchx8"], exporter="torchscript")
    assert [(r["check"], r["passed"]) for r in info.value.report] == [("example", False), ("resized", False)]
    assert out.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.onnx"]  # no staging leftovers


def test_verify_false_skips_the_checks(factories, tmp_path, monkeypatch):
    def no_session(*args, **kwargs):
        raise AssertionError("verify=False must not run ONNX Runtime")

    monkeypatch.setattr(ort, "InferenceSession", no_session)
    result = export(f"{FACTORIES}:build", tmp_path / "small.onnx", inputs=["x:1x8"], exporter="torchscript", verify=False)
    assert result.report == [] and (tmp_path / "small.onnx").exists()
