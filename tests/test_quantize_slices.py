"""int8 that is never silently wrong (issue 29): a detector whose last Concat joins box coordinates (0-640) and
class scores (0-1). One int8 scale on that Concat flattens every score to 0 while the whole output's cosine
stays 0.9999. The quantizer keeps such a Concat in float (its inputs' calibrated ranges differ > 100x) and says
why; the accuracy report measures each part of an output a Concat made; and a part that collapses anyway is an
error (nothing written) unless --allow-loss."""

from __future__ import annotations

import importlib
import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from helpers import make_model, rand
from optim.cli import main
from optim.optimizer.quantization import CollapseError, quantize
from optim.optimizer.quantization.accuracy import OutputAccuracy, SliceAccuracy
from optim.optimizer.quantization.slices import output_slices
from optim.optimizer.quantization.target import parse_target

N = helper.make_node
# The module (the package exports its function of the same name): the range check is patched out there.
QUANTIZE_MODULE = importlib.import_module("optim.optimizer.quantization.quantize")


def _detector(tail: str = "reshape") -> bytes:
    """x -> Conv -> Relu -> (boxes: Conv, Sigmoid, x640 | scores: Conv, Sigmoid) -> Concat(axis 1) -> tail."""
    rng = np.random.default_rng(0)
    nodes = [N("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]), N("Relu", ["c0"], ["f"]),
             N("Conv", ["f", "wb", "bb"], ["cb"]), N("Sigmoid", ["cb"], ["sb"]), N("Mul", ["sb", "px"], ["boxes"]),
             N("Conv", ["f", "ws", "bs"], ["cs"]), N("Sigmoid", ["cs"], ["scores"]),
             N("Concat", ["boxes", "scores"], ["cat"], axis=1, name="head_concat"),
             N("Reshape", ["cat", "shape"], ["flat"])]
    if tail == "transpose":  # YOLOv8's [N, 84, anchors] -> [N, anchors, 84]
        nodes.append(N("Transpose", ["flat"], ["detections"], perm=[0, 2, 1]))
    else:
        nodes[-1].output[0] = "detections"
    return make_model(nodes, {"x": (np.float32, ["batch", 3, 16, 16])}, ["detections"],
                      {"w0": rand(rng, 16, 3, 3, 3) * 0.3, "b0": rand(rng, 16) * 0.1, "wb": rand(rng, 4, 16, 1, 1) * 0.3,
                       "bb": rand(rng, 4) * 0.1, "px": np.array(640, np.float32), "ws": rand(rng, 8, 16, 1, 1) * 0.3,
                       "bs": rand(rng, 8) * 0.1, "shape": np.array([0, 12, -1], np.int64)})


@pytest.fixture
def detector(tmp_path):
    path = tmp_path / "det.onnx"
    path.write_bytes(_detector())
    return path


def test_the_quantizer_keeps_a_concat_of_far_apart_ranges_in_float_and_measures_each_part(detector, tmp_path):
    result = quantize(detector, tmp_path / "q.onnx", calibration_random=10)
    assert [k["node"] for k in result.kept_float_ranges] == ["head_concat"]
    assert "differ" in result.kept_float_ranges[0]["reason"] and "kept in float" in result.kept_float_ranges[0]["reason"]
    (row,) = result.accuracy
    assert [s.part for s in row.slices] == ["Concat 'head_concat' input 'boxes'", "Concat 'head_concat' input 'scores'"]
    assert not row.collapsed and min(s.cosine for s in row.slices) > 0.99
    q = onnx.load(str(tmp_path / "q.onnx"))
    concat = next(n for n in q.graph.node if n.op_type == "Concat")
    producers = {o: n.op_type for n in q.graph.node for o in n.output}
    assert all(producers[i] == "DequantizeLinear" for i in concat.input)  # each input keeps its own scale
    assert all(n.input[0] != "cat" for n in q.graph.node if n.op_type == "QuantizeLinear")  # its output stays float


def test_a_collapsed_part_is_an_error_and_nothing_is_written_unless_loss_is_allowed(detector, tmp_path, monkeypatch):
    """Without the range check (as another quantizer would), the scores collapse: the whole output still shows a
    cosine near 1, the part's report shows one level, and quantize refuses to write it."""
    monkeypatch.setattr(QUANTIZE_MODULE, "concat_traps", lambda *_args, **_kw: [])
    out = tmp_path / "q.onnx"
    with pytest.raises(CollapseError) as e:
        quantize(detector, out, calibration_random=10)
    message = str(e.value)
    assert "the part from Concat 'head_concat' input 'scores'" in message and "all one level" in message
    assert "--allow-loss" in message and "\n" not in message and not out.exists()
    result = quantize(detector, out, calibration_random=10, allow_loss=True)
    (row,) = result.accuracy
    assert row.collapsed and row.cosine > 0.999  # the whole output looks fine; its scores are gone
    assert row.worst_slice().part.endswith("'scores'") and row.worst_slice().levels == 1
    assert out.exists() and any(w.startswith("kept despite --allow-loss") for w in result.warnings)


def test_the_cli_says_so_in_one_sentence_and_json_has_the_parts(detector, tmp_path, monkeypatch):
    r = CliRunner().invoke(main, ["quantize", str(detector), "-o", str(tmp_path / "q.onnx"), "--calib-random", "10"])
    assert r.exit_code == 0, r.output
    assert "kept in float: Concat 'head_concat' joins inputs whose ranges differ" in r.stdout
    assert "worst part: Concat 'head_concat' input" in r.stdout
    r = CliRunner().invoke(main, ["quantize", str(detector), "-o", str(tmp_path / "q.onnx"), "--calib-random", "10", "--json"])
    row = json.loads(r.stdout)["accuracy"][0]
    assert len(row["slices"]) == 2 and row["collapsed"] is False
    monkeypatch.setattr(QUANTIZE_MODULE, "concat_traps", lambda *_args, **_kw: [])
    r = CliRunner().invoke(main, ["quantize", str(detector), "-o", str(tmp_path / "bad.onnx"), "--calib-random", "10"])
    assert r.exit_code == 2 and "collapsed in int8" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "bad.onnx").exists()


def test_parts_are_followed_through_a_transpose():
    slicing = output_slices(onnx.load_from_string(_detector("transpose")))["detections"]
    assert slicing.axis == 2 and [(s.start, s.stop) for s in slicing.slices] == [(0, 4), (4, 12)]


def test_a_target_counts_each_part():
    row = OutputAccuracy("y", "OptimEP", 0.9999, 40.0, 1.0, slices=[SliceAccuracy("a", 0.9999, 40.0, 1.0, 2, False),
                                                                   SliceAccuracy("b", 0.95, 12.0, 0.5, 2, False)])
    assert parse_target("cosine>=0.99").value([row]) == 0.95
    assert parse_target("sqnr>=30").value([row]) == 12.0


def _conv_head() -> bytes:
    """x -> Conv -> Relu -> one Conv head (4 box channels, weights x300, beside 8 class channels, x0.003): no Concat,
    one output scale for both (a YOLOv5-style head before decoding)."""
    rng = np.random.default_rng(1)
    head = rand(rng, 12, 16, 1, 1)
    head[:4] *= 300
    head[4:] *= 0.003
    nodes = [N("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]), N("Relu", ["c0"], ["f"]),
             N("Conv", ["f", "wh", "bh"], ["head"], name="head_conv")]
    return make_model(nodes, {"x": (np.float32, ["batch", 3, 16, 16])}, ["head"],
                      {"w0": rand(rng, 16, 3, 3, 3) * 0.3, "b0": rand(rng, 16) * 0.1, "wh": head,
                       "bh": np.zeros(12, np.float32)})


def test_small_range_channels_of_one_output_are_measured_apart(tmp_path):
    """No Concat to read: the report finds the output's channels whose float range is under 1/100 of the output's,
    measures them as a part, and a collapse there is an error like a Concat part's."""
    path = tmp_path / "head.onnx"
    path.write_bytes(_conv_head())
    with pytest.raises(CollapseError, match="the part from channels 4-11 of axis 1"):
        quantize(path, tmp_path / "q.onnx", calibration_random=10)
    result = quantize(path, tmp_path / "q.onnx", calibration_random=10, allow_loss=True)
    (row,) = result.accuracy
    assert [s.part.split(" (")[0] for s in row.slices] == ["channels 4-11 of axis 1"]
    assert row.collapsed and row.cosine > 0.999  # the whole output hides it
    # Excluding the head keeps its output float: the part is measured again and is fine.
    result = quantize(path, tmp_path / "q.onnx", calibration_random=10, exclude=["head_conv"])
    (row,) = result.accuracy
    assert row.slices and not row.collapsed and row.slices[0].cosine > 0.99


def test_a_classifier_has_no_small_channel_groups():
    from optim.optimizer.quantization.slices import small_channel_groups

    rng = np.random.default_rng(0)
    logits = [rng.standard_normal((4, 10)).astype(np.float32) for _ in range(3)]
    assert small_channel_groups(logits) is None
    for batch in logits:
        batch[:, 3] *= 1e-3  # one class far below the others: chance, not a block of the layout
    assert small_channel_groups(logits) is None
    for batch in logits:
        batch[:, 4:7] *= 1e-3  # classes 3-6 far below the others: a block
    groups = small_channel_groups(logits)
    assert groups.axis == 1 and [(s.start, s.stop) for s in groups.slices] == [(3, 7)]
    assert groups.slices[0].label.startswith("channels 3-6 of axis 1 (range under 1/100 of the output's ")
