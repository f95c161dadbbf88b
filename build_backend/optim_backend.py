"""optim's build backend: scikit-build-core for wheels and sdists, and an editable install of our own.

The repository's top level is the package (pyproject.toml maps exporter/, optimizer/, ... into optim.*; CMake
installs __init__.py, cli.py and torch_backend/ as optim, optim.cli and optim.torch), which scikit-build-core's
editable mode cannot mirror: it keeps copies of what CMake installs, so an edit to cli.py or torch_backend/ would
not be seen. `pip install -e .` here builds the normal wheel once (the C++ library), keeps liboptim_ep.so in
build/editable/ (not in ep_plugin/, where the next wheel build would pick it up as package data), and installs a
wheel holding only the metadata, the `optim` command and a finder that imports optim from this checkout: optim ->
./__init__.py (its submodules from the top-level folders, optim.cli -> ./cli.py) and optim.torch ->
./torch_backend/. Edit any .py file and the next import sees it; after a C++ change run `pip install -e .` again
(or `make install` for the wheel)."""

from __future__ import annotations

import base64
import hashlib
import tempfile
import zipfile
from pathlib import Path

from scikit_build_core import build as _skbuild
from scikit_build_core.build import (  # noqa: F401 - the hooks pip calls for wheels and sdists
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "optim/ep_plugin/liboptim_ep.so"  # in the built wheel
EDITABLE_LIBRARY = ROOT / "build" / "editable" / "liboptim_ep.so"
FINDER_MODULE = "_optim_editable"

FINDER = '''"""Imports optim from the checkout at {root} (an editable install: build_backend/optim_backend.py)."""
import importlib.abc
import importlib.util
import sys

ROOT = {root!r}
LIBRARY = {library!r}  # OptimEP's library for this checkout (ep_plugin/loader.py looks here)
FOLDERS = {{"optim": ROOT, "optim.torch": ROOT + "/torch_backend"}}


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        folder = FOLDERS.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, folder + "/__init__.py",
                                                      submodule_search_locations=[folder])


if not any(type(f).__name__ == "_CheckoutFinder" for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutFinder())
'''


def get_requires_for_build_editable(config_settings=None):
    return _skbuild.get_requires_for_build_wheel(config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="optim-editable-") as tmp:
        built = Path(tmp) / _skbuild.build_wheel(tmp, config_settings)
        with zipfile.ZipFile(built) as whl:
            EDITABLE_LIBRARY.parent.mkdir(parents=True, exist_ok=True)
            EDITABLE_LIBRARY.write_bytes(whl.read(LIBRARY))
            dist_info = next(n.split("/")[0] for n in whl.namelist() if n.split("/")[0].endswith(".dist-info"))
            kept = {n: whl.read(n) for n in whl.namelist()
                    if n.startswith(dist_info + "/") and not n.endswith("/RECORD")}
        files = {f"{FINDER_MODULE}.py": FINDER.format(root=str(ROOT), library=str(EDITABLE_LIBRARY)).encode(),
                 f"{FINDER_MODULE}.pth": f"import {FINDER_MODULE}\n".encode(), **kept}
        out = Path(wheel_directory) / built.name
        _write_wheel(out, files, f"{dist_info}/RECORD")
        return out.name


def _write_wheel(path: Path, files: dict[str, bytes], record: str) -> None:
    lines = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in files.items():
            whl.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            lines.append(f"{name},sha256={digest},{len(data)}")
        lines.append(f"{record},,")
        whl.writestr(record, "\n".join(lines) + "\n")


__all__ = ["build_editable", "build_sdist", "build_wheel", "get_requires_for_build_editable",
           "get_requires_for_build_sdist", "get_requires_for_build_wheel", "prepare_metadata_for_build_editable",
           "prepare_metadata_for_build_wheel"]
