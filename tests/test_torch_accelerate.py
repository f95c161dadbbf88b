"""optim.torch.accelerate(): an nn.Module running the model on OptimEP; its state_dict is the original's,
new weights recompile, save(dir) writes ONNX that optim.session runs to the same outputs, pickling refuses."""

from __future__ import annotations

import io
import json

import numpy as np
import onnx
import pytest
import torch

import optim
import optim.torch
from helpers import assert_close
from optim.models import example_inputs, get


def _x(seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(example_inputs("cnn", seed)["x"])


def test_accelerate_round_trip_state_dict_new_weights_and_save(tmp_path):
    model = get("cnn").factory()
    acc = optim.torch.accelerate(model, (_x(),))
    assert isinstance(acc, torch.nn.Module) and acc.example_error <= 1e-4
    with torch.no_grad():
        assert_close(acc(_x(1)).numpy(), model(_x(1)).numpy())
    assert list(acc.state_dict()) == list(model.state_dict())
    assert [g.runs_on for g in acc.report.graphs] == ["OptimEP"]

    # New weights (load_state_dict copies in place): the next call recompiles with them.
    state = {k: v + 0.01 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    acc.load_state_dict(state)
    with torch.no_grad():
        assert_close(acc(_x(2)).numpy(), model(_x(2)).numpy(), what="after load_state_dict")
    assert len(acc.report.graphs) == 2 and "recompiled" in acc.report.graphs[-1].notes[0]

    (path,) = acc.save(tmp_path / "saved")
    sess = optim.session(str(path))
    (name,) = [i.name for i in onnx.load(str(path)).graph.input]
    with torch.no_grad():
        assert_close(sess.run(None, {name: _x(3).numpy()})[0], acc(_x(3)).numpy(), what="saved ONNX")
    report = json.loads((tmp_path / "saved" / "report.json").read_text())
    assert [g["runs_on"] for g in report["graphs"]] == ["OptimEP", "OptimEP"]

    with pytest.raises(TypeError, match="cannot be pickled: torch.save its state_dict"):
        torch.save(acc, io.BytesIO())
    buffer = io.BytesIO()
    torch.save(acc.state_dict(), buffer)  # the supported way: the original model's weights
    buffer.seek(0)
    assert set(torch.load(buffer)) == set(model.state_dict())


def test_accelerate_int8_reports_accuracy():
    model = get("mlp").factory()
    calib = [torch.from_numpy(example_inputs("mlp", s)["x"]) for s in range(100, 110)]  # one tensor per sample
    x = torch.from_numpy(example_inputs("mlp", 0)["x"])
    acc = optim.torch.accelerate(model, (x,), quantize="int8", calib=calib)
    (graph,) = acc.report.graphs
    assert graph.mode == "int8" and graph.accuracy and graph.placement.integer_units > 0
    assert "cosine vs fp32" in graph.line()


def test_accelerate_refuses_bad_arguments_in_one_sentence():
    with pytest.raises(optim.torch.OptionsError, match="quantize='int8' needs calibration samples"):
        optim.torch.accelerate(get("mlp").factory(), (torch.zeros(1, 64),), quantize="int8")
    with pytest.raises(optim.torch.OptionsError, match="accelerate\\(\\) takes an nn.Module"):
        optim.torch.accelerate(lambda x: x, (torch.zeros(1),))
