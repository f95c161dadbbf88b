"""OptimEP's CreateEpFactories against a host whose ONNX Runtime cannot serve the API version it needs (23):
a fake OrtApiBase (tests/embed/version_harness.cc) serves only older versions. OptimEP must answer with an
error status naming the version needed and offer no factory, never crash."""

from __future__ import annotations

import pytest

import optim
from embed_helpers import ROOT, ort_include_dir, run_checked


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = tmp_path_factory.mktemp("harness") / "version_harness"
    run_checked(["g++", "-std=c++17", "-O0", f"-I{ort_include_dir()}", ROOT / "tests" / "embed" / "version_harness.cc",
                 "-o", exe, "-ldl"])
    return exe


def handshake(harness, max_version: int) -> dict:
    out = run_checked([harness, optim.library_path(), max_version]).stdout
    return dict(line.split(": ", 1) for line in out.splitlines())


def test_too_old_onnxruntime_gets_a_clear_error(harness):
    got = handshake(harness, 22)
    assert got["factories"] == "0"
    assert got["status"].startswith("OptimEP: needs the ONNX Runtime C API version 23"), got
    assert "this ONNX Runtime (0.0.0-fake) does not offer that version" in got["status"]
    assert got["code"] == "9"  # ORT_NOT_IMPLEMENTED


def test_api_without_plugin_ep_api_gets_a_clear_error(harness):
    got = handshake(harness, 23)  # serves 23, but its GetEpApi is missing
    assert got["factories"] == "0"
    assert "offers no plugin EP API" in got["status"], got


def test_host_offering_no_api_at_all_is_refused_quietly(harness):
    got = handshake(harness, 0)  # not even version 1: no CreateStatus to report through
    assert got == {"factories": "0", "status": "none"}
