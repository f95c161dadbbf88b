"""Fixtures shared by the exporter's library and CLI tests.

torch is imported inside the fixtures: the EP tests, which never export, do not pay for it.
"""

from __future__ import annotations

import warnings

import pytest


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """One file of each kind PyTorch writes, from optimtest_factories' Small model (x: Nx8) unless
    named otherwise: traced and scripted (LoopAndBranch, x: Nx4) TorchScript, a torch.export
    archive with a dynamic batch, a state_dict, a fully pickled module."""
    import torch

    import optimtest_factories as factories

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


@pytest.fixture
def onnx_off_by_one(monkeypatch):
    """Makes ONNX Runtime's results 1 off, as an exporter bug would: verification must fail."""
    import onnxruntime as ort

    class OffByOne(ort.InferenceSession):
        def run(self, names, feeds, *args, **kwargs):
            return [o + 1 for o in super().run(names, feeds, *args, **kwargs)]

    monkeypatch.setattr(ort, "InferenceSession", OffByOne)
