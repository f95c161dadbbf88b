"""optim.exporter: artifact detection and loading, input specs, the exporters, verification, errors.

Most exports here use the TorchScript exporter (a tenth of a second) where the test is not about
the exporter choice; the dynamo exporter costs seconds per model.
"""

from __future__ import annotations

import json
import logging
import re
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
    VerificationError,
    detect_kind,
    export,
    parse_input_spec,
)

import optimtest_factories as factories
from optim.common.comparison import Tolerance

FACTORIES = "optimtest_factories"  # tests/optimtest_factories.py: the test models, importable by name


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
    ("sr=abc:int64", "'abc' is not a number or true/false"),
    ("sr=1.5:int64", "'1.5' does not fit int64"),
    ("sr=1:complex", "dtype 'complex' is not one of"),
    ("=1", "a scalar input is NAME=VALUE[:DTYPE], e.g. sr=16000:int64"),
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
    (b"PK\x03\x04 truncated zip", "is a damaged zip archive (truncated: it has no zip directory at its end)"),
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


def test_traced_torchscript_exports_with_the_torchscript_exporter(artifacts, tmp_path):
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
def test_auto_falls_back_to_torchscript_and_warns_about_traced_branches(tmp_path, caplog):
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
    with pytest.raises(ExportError, match=r"input 'x' has size 9 on axis 1 but .*small.pt2 takes x:x_dim0,8:float32 "
                                          r"\(only its named axes may change size\)"):
        export(str(artifacts["program"]), out, inputs=["x:2x9"])


def test_factory_spec_exports_and_takes_weights(tmp_path):
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


def test_weights_that_do_not_fit_are_refused(tmp_path):
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
def test_bad_factory_specs_say_what_went_wrong(tmp_path, spec, says):
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


def test_example_inputs_npz_and_dynamic_strings(tmp_path):
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


def test_output_names_come_from_the_model(tmp_path):
    result = export(f"{FACTORIES}:two_heads", tmp_path / "heads.onnx", inputs=["x:1x8"], exporter="torchscript")
    assert [o["name"] for o in result.outputs] == ["logits", "features"]
    assert [r["output"] for r in result.report] == ["logits", "features"]
    result = export(f"{FACTORIES}:Pair", tmp_path / "pair.onnx", inputs=["x:1x8"], exporter="torchscript")
    assert [o["name"] for o in result.outputs] == ["output_0", "output_1"]


# --- exporter errors and verification ------------------------------------------------------------------


@pytest.mark.parametrize("exporter, op, fix", [
    ("dynamo", "optimtest.twice", "--exporter torchscript"),
    ("torchscript", "optimtest::twice", "--exporter dynamo"),
])
def test_unsupported_op_is_named_with_its_module_and_the_fixes(tmp_path, exporter, op, fix):
    with pytest.raises(ExportError) as info:
        export(f"{FACTORIES}:UsesCustomOp", tmp_path / "out.onnx", inputs=["x:1x8"], exporter=exporter)
    message = str(info.value)
    assert f"the model uses {op} in module blocks.1 (Twice), which has no ONNX translation at opset 18" in message
    assert fix in message and "another --opset" in message and "replace that op in the model" in message
    assert "pytorch/issues" not in message  # a custom op is the user's to translate, not PyTorch's
    assert list(tmp_path.iterdir()) == []


def test_untranslatable_pytorch_op_points_to_the_pytorch_issue_tracker(tmp_path):
    with pytest.raises(ExportError) as info:
        export(f"{FACTORIES}:UsesKthvalue", tmp_path / "out.onnx", inputs=["x:2x8"])  # auto: both exporters fail
    message = str(info.value)
    assert message.startswith("ONNX export failed: the model uses aten.kthvalue in module pool (SecondSmallest), "
                              "which has no ONNX translation at opset 18 (dynamo exporter: ")
    assert "; torchscript exporter: " in message and "try another --opset than 18" in message
    assert message.endswith("report the missing translation at https://github.com/pytorch/pytorch/issues "
                            "(label 'module: onnx')")


def test_op_location_reads_eager_scripted_and_exported_models():
    from optim.exporter.loading import LoadedModel
    from optim.exporter.locate import op_location

    args = (torch.randn(2, 8),)
    model = factories.UsesKthvalue().eval()
    program = torch.export.export(model, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(model)
    for loaded in (LoadedModel(model, "factory", "m"), LoadedModel(scripted, "torchscript", "m"),
                   LoadedModel(program.module(), "torch.export", "m", program=program)):
        for name in ("aten::kthvalue", "aten.kthvalue", "aten.kthvalue.default"):
            assert op_location(loaded, args, name) == "module pool (SecondSmallest)", (loaded.kind, name)
        assert op_location(loaded, args, "aten::cholesky") is None
    top = LoadedModel(factories.SecondSmallest(), "factory", "m")
    assert op_location(top, args, "aten::kthvalue") == "the top-level module (SecondSmallest)"
    # Looking must never replace the export error with its own: a model that fails gives None.
    assert op_location(LoadedModel(factories.Small(), "factory", "m"), (torch.randn(2, 3),), "aten::addmm") is None


def test_failed_verification_leaves_no_file_and_keeps_the_old_one(tmp_path, onnx_off_by_one):
    out = tmp_path / "small.onnx"
    out.write_bytes(b"previous export")
    with pytest.raises(VerificationError, match="verification against PyTorch failed, so no file was written: "
                                                "output 'output' on the example inputs: max abs error 1, ") as info:
        export(f"{FACTORIES}:build", out, inputs=["x:batchx8"], exporter="torchscript")
    assert [(r["check"], r["passed"]) for r in info.value.report] == [("example", False), ("resized", False)]
    assert out.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.onnx"]  # no staging leftovers


def test_report_rows_name_their_tolerance():
    from optim.exporter.verify import check_against_torch, report_row

    def compare(output, check, got, want):
        return report_row(check, check_against_torch(output, got, want))

    row = compare("y", "example", np.float32([1.0, 2.00005]), np.float32([1.0, 2.0]))
    assert row["passed"] and row["tolerance"] == "float (|diff| <= 0.0001 + 0.0001*|torch|)"
    assert compare("y", "example", np.float16([1.0]), np.float16([1.0]))["tolerance"].startswith("half (")
    ids = compare("ids", "resized", np.int64([1, 2]), np.int64([1, 3]))
    assert ids["tolerance"] == "exact" and not ids["passed"] and ids["max_abs"] == 1.0


def test_progress_says_each_step_and_what_the_file_is(artifacts, tmp_path):
    lines = []
    export(str(artifacts["traced"]), tmp_path / "t.onnx", inputs=["x:batchx8"], progress=lines.append)
    assert lines == [
        f"loading {artifacts['traced']}",
        f"{artifacts['traced']} is a TorchScript archive (told from its contents)",
        "exporting with the torchscript exporter (opset 18)",
        "verifying against PyTorch on ONNX Runtime's CPU EP: example inputs (x: 2x8 float32)",
        "verifying against PyTorch on ONNX Runtime's CPU EP: resized inputs (x: 3x8 float32)",
    ]


def test_torchscript_runtime_errors_are_reduced_to_their_cause(artifacts, tmp_path):
    # The interpreter's message starts with its code traceback; the sentence needs the last line.
    with pytest.raises(ExportError, match=r"fails on the example inputs \(x: 2x9 float32\): RuntimeError: mat1 and mat2 "
                                          r"shapes cannot be multiplied \(2x9 and 8x4\); check the input shapes"):
        export(str(artifacts["traced"]), tmp_path / "t.onnx", inputs=["x:2x9"])


def test_verify_false_skips_the_checks(tmp_path, monkeypatch):
    def no_session(*args, **kwargs):
        raise AssertionError("verify=False must not run ONNX Runtime")

    monkeypatch.setattr(ort, "InferenceSession", no_session)
    result = export(f"{FACTORIES}:build", tmp_path / "small.onnx", inputs=["x:1x8"], exporter="torchscript", verify=False)
    assert result.report == [] and (tmp_path / "small.onnx").exists()


# --- tolerances, and telling an unstable model from a wrong export ------------------------------------


def test_an_unstable_model_fails_with_float64_saying_it_is_the_model_not_the_export(tmp_path):
    # PyTorch's float32 misses the 1e-4 tolerance against its own float64 on this model, like ONNX Runtime does.
    with pytest.raises(VerificationError) as failed:
        export(f"{FACTORIES}:cancelling", tmp_path / "c.onnx", inputs=["x:2x1024"], exporter="torchscript")
    message = str(failed.value)
    assert "output 'output': PyTorch's float32 is off float64 by max abs " in message
    # Both float32 runtimes land about as far from float64 ("as close as PyTorch", within AS_CLOSE_FACTOR);
    # either way the sentence says the model is unstable.
    assert "is unstable in float32" in message
    atol = float(message.split("--atol ")[1].split(")")[0])
    assert atol > max(row["max_abs"] for row in failed.value.report)
    assert message.endswith("or write it unverified (--no-verify)")
    assert list(tmp_path.iterdir()) == []
    # The suggested tolerance passes.
    result = export(f"{FACTORIES}:cancelling", tmp_path / "c.onnx", inputs=["x:2x1024"], exporter="torchscript",
                    tolerance=Tolerance(atol=atol))
    assert result.passed and result.report[0]["atol"] == atol


def test_a_wrong_export_is_told_apart_from_an_unstable_model(tmp_path, onnx_off_by_one):
    with pytest.raises(VerificationError, match="output 'output': PyTorch's float32 is off float64 by max abs [0-9.e-]+, "
                                                "ONNX Runtime's by 1: PyTorch's float32 is within the tolerance of "
                                                "float64 and ONNX Runtime is not, so the exported graph differs"):
        export(f"{FACTORIES}:build", tmp_path / "small.onnx", inputs=["x:1x8"], exporter="torchscript")


def test_a_model_that_cannot_run_in_float64_still_fails_with_its_figures(tmp_path, onnx_off_by_one):
    with pytest.raises(VerificationError, match=r"max abs error 1, .*; PyTorch cannot run this model in float64 to tell "
                                                r"\(RuntimeError: .*\); to keep the file, loosen the check \(--atol 2\)"):
        export(f"{FACTORIES}:Float32Constant", tmp_path / "f.onnx", inputs=["x:1x8"], exporter="torchscript")


def test_unverified_export_says_so(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="optim.exporter"):
        result = export(f"{FACTORIES}:cancelling", tmp_path / "c.onnx", inputs=["x:2x1024"], exporter="torchscript",
                        verify=False)
    assert not result.verified and not result.passed and result.to_dict()["verified"] is False
    assert "was not verified against PyTorch" in caplog.text
    assert (tmp_path / "c.onnx").exists()


@pytest.mark.parametrize("max_abs, atol", [(0.00123, 0.002), (0.0049, 0.005), (0.005, 0.01), (0.7, 1.0), (1.0, 2.0)])
def test_suggested_atol_is_a_round_number_above_the_error(max_abs, atol):
    from optim.exporter.stability import suggested_atol

    assert suggested_atol(max_abs) == pytest.approx(atol)
