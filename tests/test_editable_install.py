"""`pip install -e .` imports optim from the checkout (build_backend/optim_backend.py): the editable wheel holds the
metadata, the `optim` command's and torch.compile's entry points and a finder; with the finder, optim, optim.cli,
the top-level folders and optim.torch (torch_backend/) all load from this repository, and the library it built is
found in build/editable/. (pip itself is not run here: the hook it calls is.)"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # builds the wheel once through scikit-build-core (incremental: seconds)


@pytest.fixture(scope="module")
def editable_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("editable")
    code = ("import sys; sys.path.insert(0, 'build_backend'); import optim_backend; "
            f"print(optim_backend.build_editable({str(out)!r}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def test_the_editable_wheel_holds_metadata_entry_points_and_the_finder(editable_wheel):
    with zipfile.ZipFile(editable_wheel) as whl:
        names = whl.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = whl.read(f"{dist_info}/entry_points.txt").decode()
        record = whl.read(f"{dist_info}/RECORD").decode()
        pth = whl.read("_optim_editable.pth").decode()
    assert not any(n.startswith("optim/") for n in names), "the package itself must come from the checkout"
    assert "optim = optim.cli:main" in entry_points and "[torch_dynamo_backends]" in entry_points
    assert pth.strip() == "import _optim_editable"
    assert all(n in record for n in names)


def test_with_the_finder_optim_loads_from_the_checkout(editable_wheel, tmp_path):
    with zipfile.ZipFile(editable_wheel) as whl:
        (tmp_path / "_optim_editable.py").write_bytes(whl.read("_optim_editable.py"))
    code = ("import _optim_editable, optim, optim.cli, optim.exporter, optim.optimizer.quantization, optim.torch.capture; "
            "print(optim.__file__); print(optim.cli.__file__); print(optim.exporter.__file__); "
            "print(optim.optimizer.quantization.__file__); print(optim.torch.capture.__file__); "
            "print(optim.library_path())")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("OPTIM_EP_LIBRARY", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    paths = [Path(p) for p in done.stdout.split()]
    assert paths[:5] == [ROOT / "__init__.py", ROOT / "cli.py", ROOT / "exporter" / "__init__.py",
                         ROOT / "optimizer" / "quantization" / "__init__.py", ROOT / "torch_backend" / "capture.py"]
    assert paths[5] == ROOT / "build" / "editable" / "liboptim_ep.so" and paths[5].is_file()
    assert not (ROOT / "ep_plugin" / "liboptim_ep.so").exists()  # the next wheel build must not take it as package data
