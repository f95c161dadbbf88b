"""The wheel as a user gets it: `pip install optim-*.whl` into a fresh venv pulls only the runtime's
dependencies (no torch, no onnxsim), bundles liboptim_ep.so where optim.library_path() finds it, and
`optim doctor` / `optim run` work there on OptimEP; export and serve say which extra they need.

The wheel is the one `make install` put in dist/ when it is newer than every source it is built from,
else one built here (incrementally, in build/); OPTIM_WHEEL names another. pip reaches the package
registry (its cache makes later runs quick): about a minute on 2 cores with a warm cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embed_helpers import ROOT, mixed_model, run_checked

pytestmark = [pytest.mark.slow, pytest.mark.wheel]

HEAVY = {"torch", "onnxscript", "onnxsim", "matplotlib", "transformers", "openvino", "sklearn", "fastapi", "uvicorn",
         "ray"}
# What the wheel is built from: a dist/ wheel older than any of these is stale.
SOURCES = ["__init__.py", "cli.py", "pyproject.toml", "build_backend", "CMakeLists.txt", "cmake", "ep_plugin", "common",
           "exporter", "optimizer", "models", "serve", "torch_backend"]


def _newest_source() -> float:
    newest = 0.0
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else (p for p in path.rglob("*")
                                               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so")
        newest = max([newest, *(p.stat().st_mtime for p in files)])
    return newest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if os.environ.get("OPTIM_WHEEL"):
        return Path(os.environ["OPTIM_WHEEL"])
    built = sorted((ROOT / "dist").glob("optim-*.whl"), key=lambda p: p.stat().st_mtime)
    if built and built[-1].stat().st_mtime >= _newest_source():
        return built[-1]
    out = tmp_path_factory.mktemp("wheel")
    run_checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", out, ROOT])
    return next(out.glob("optim-*.whl"))


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel and the dependencies it declares, nothing else."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    run_checked([sys.executable, "-m", "venv", root])
    run_checked([root / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel])
    return root / "bin"


def test_wheel_bundles_the_library_and_only_runtime_dependencies(wheel, venv):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "optim/ep_plugin/liboptim_ep.so" in names
    assert not [n for n in names if n.endswith((".cc", ".h"))], "C++ sources are not shipped"
    assert "optim/torch/backend.py" in names  # torch_backend/, installed as optim.torch
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "optim = optim.torch.backend:optim_backend" in zipfile.ZipFile(wheel).read(entry_points).decode()
    installed = {p["name"].lower() for p in json.loads(run_checked([venv / "python", "-m", "pip", "list", "--format",
                                                                    "json"]).stdout)}
    assert {"optim", "onnxruntime", "onnx", "numpy", "click"} <= installed
    assert not installed & HEAVY
    probe = ("import json, sys, optim; print(json.dumps({'lib': str(optim.library_path()), "
             "'modules': sorted(m.split('.')[0] for m in sys.modules)}))")
    got = json.loads(run_checked([venv / "python", "-c", probe], cwd=venv).stdout)
    assert Path(got["lib"]).is_relative_to(venv.parent), got["lib"]
    assert not set(got["modules"]) & HEAVY


def test_doctor_and_run_in_the_fresh_venv(venv, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPTIM_EP_LIBRARY"}  # the wheel's own library
    doctor = json.loads(run_checked([venv / "optim", "doctor", "--json"], env=env, cwd=tmp_path).stdout)
    assert doctor["ok"] and doctor["registered"], doctor
    assert Path(doctor["library"]).is_relative_to(venv.parent)
    model = tmp_path / "mixed.onnx"
    model.write_bytes(mixed_model())
    report = json.loads(run_checked([venv / "optim", "run", model, "--input", "x:2x12", "--json"], env=env,
                                    cwd=tmp_path).stdout)
    placement = report["placement"]
    assert (placement["optim_nodes"], placement["cpu_nodes"]) == (3, 1), placement
    assert report["outputs"]["y"]["shape"] == [2, 5]


def test_export_names_its_extra(venv, tmp_path):
    done = subprocess.run([venv / "optim", "export", "mlp", "-o", tmp_path / "m.onnx"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'optim[export]'" in done.stderr, done.stderr


def test_serve_names_its_extra(venv, tmp_path):
    model = tmp_path / "mixed.onnx"
    model.write_bytes(mixed_model())
    done = subprocess.run([venv / "optim", "serve", model], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "pip install 'optim[serve]'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_optim_torch_names_its_extra(venv, tmp_path):
    done = subprocess.run([venv / "python", "-c", "import optim.torch"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    assert "ImportError: optim.torch needs PyTorch: pip install 'optim[torch]'" in done.stderr, done.stderr
