"""`optim optimize` then `optim quantize` on an opset-11 CNN (as Paddle-converted and older exports are): Conv+BN
folding gives each Conv a bias, whose int8 form needs DequantizeLinear(axis), new in opset 13. quantize raises the
opset first and says so, or refuses in one sentence (exit 2, no file) when the conversion fails or changes the
outputs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers import rand
from optim.cli import main
from optim.ep_plugin import placement, session
from optim.optimizer.quantization import qdq_opset

N = helper.make_node
RNG = np.random.default_rng(11)


def _cnn_opset11() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu twice, no Conv bias, opset 11 (IR 6)."""
    nodes, weights, channels = [], {}, [3, 8, 16]
    x = "x"
    for i, (c_in, c_out) in enumerate(zip(channels, channels[1:]), 1):
        nodes += [N("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], strides=[i, i], name=f"conv{i}"),
                  N("BatchNormalization", [f"c{i}", f"g{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"], name=f"bn{i}"),
                  N("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        weights.update({f"w{i}": rand(RNG, c_out, c_in, 3, 3) * 0.3, f"g{i}": np.abs(rand(RNG, c_out)) + 0.5,
                        f"b{i}": rand(RNG, c_out) * 0.1, f"m{i}": rand(RNG, c_out) * 0.1,
                        f"v{i}": np.abs(rand(RNG, c_out)) + 0.5})
        x = f"r{i}"
    graph = helper.make_graph(nodes, "cnn11", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 16, 8, 8])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    """The opset-11 CNN after `optim optimize` (both BatchNorms folded: each Conv now has a bias)."""
    folder = tmp_path_factory.mktemp("opset11")
    src, out = folder / "cnn11.onnx", folder / "cnn11.opt.onnx"
    onnx.save(_cnn_opset11(), str(src))
    result = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Conv", "Relu", "Conv", "Relu"]
    assert all(len(n.input) == 3 for n in model.graph.node if n.op_type == "Conv")
    assert model.opset_import[0].version == 11
    return out


def _quantize(src, out, *extra):
    return CliRunner().invoke(main, ["quantize", str(src), "-o", str(out), "--calib-random", "10", *extra])


def test_quantize_raises_the_opset_to_13_and_says_so(optimized, tmp_path):
    out = tmp_path / "cnn.int8.onnx"
    result = _quantize(optimized, out)
    assert result.exit_code == 0, result.output
    assert "converted from opset 11 to 13 first: int8 QDQ (per-channel DequantizeLinear) needs opset 13" in result.stdout
    model = onnx.load(str(out))
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [13]
    bias_dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and "bias" in n.input[0]]
    assert len(bias_dq) == 2 and all(a.name == "axis" for n in bias_dq for a in n.attribute)
    p = placement(session(str(out)))
    assert p.fraction == 1.0 and p.integer_units == 2, p.summary()


def test_json_report_names_the_conversion(optimized, tmp_path):
    result = _quantize(optimized, tmp_path / "cnn.int8.onnx", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["opset_converted_from"] == 11


def _assert_refused(result, out, says: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("Error: ") and says in lines[-1], result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_failed_conversion_is_refused_in_one_sentence(optimized, tmp_path, monkeypatch):
    def fails(model, target):
        raise RuntimeError("No Adapter For Current Version $11 for Conv")

    monkeypatch.setattr(qdq_opset.version_converter, "convert_version", fails)
    out = tmp_path / "cnn.int8.onnx"
    _assert_refused(_quantize(optimized, out), out,
                    "int8 QDQ needs opset 13 and this model is at opset 11, which onnx's version converter could not "
                    "raise (No Adapter For Current Version $11 for Conv); re-export the model at opset 13 or later")


def test_a_conversion_that_changes_outputs_is_refused(optimized, tmp_path, monkeypatch):
    real = qdq_opset.version_converter.convert_version

    def wrong(model, target):
        converted = real(model, target)
        bias = next(t for t in converted.graph.initializer if numpy_helper.to_array(t).ndim == 1)
        bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + 1, bias.name))
        return converted

    monkeypatch.setattr(qdq_opset.version_converter, "convert_version", wrong)
    out = tmp_path / "cnn.int8.onnx"
    _assert_refused(_quantize(optimized, out), out, "raising the model from opset 11 to 13 (needed for int8 QDQ) changed output")
