"""Locating liboptim_ep.so and registering it with ONNX Runtime, once per process."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import onnxruntime as ort

EP_NAME = "OptimEP"
LIBRARY_ENV = "OPTIM_EP_LIBRARY"  # points at another build of the library (e.g. the sanitizer build)
LIBRARY_FILE = "liboptim_ep.so"
EDITABLE_FINDER = "_optim_editable"  # build_backend/optim_backend.py's module in an editable install
API_VERSION = 23  # the ORT API version the library asks for (ort_version_supported)

_lock = threading.Lock()
_registered_path: Path | None = None


class EpLoadError(RuntimeError):
    """OptimEP's library is missing or ONNX Runtime refused to load it."""


def library_path() -> Path:
    """Path of the OptimEP shared library: $OPTIM_EP_LIBRARY if set, else the one installed beside this module, else
    (an editable install, `pip install -e .`) the one its finder module names."""
    override = os.environ.get(LIBRARY_ENV)
    # Resolved here: ONNX Runtime would take a relative path as relative to its own package folder, not the cwd.
    path = Path(override).resolve() if override else Path(__file__).resolve().parent / LIBRARY_FILE
    where = f"${LIBRARY_ENV}={override}" if override else "the installed optim.ep_plugin package"
    fix = "rebuild with `make install`"
    editable = getattr(sys.modules.get(EDITABLE_FINDER), "LIBRARY", None)
    if not override and not path.is_file() and editable:
        path, where, fix = Path(editable), "this checkout's editable install", "run `pip install -e .` again"
    if not path.is_file():
        raise EpLoadError(f"OptimEP library not found at {path} ({where}); {fix}.")
    return path


def register() -> Path:
    """Registers OptimEP with ONNX Runtime (idempotent) and returns the library path used."""
    global _registered_path
    with _lock:
        if _registered_path is not None:
            return _registered_path
        path = library_path()
        try:
            ort.register_execution_provider_library(EP_NAME, str(path))
        except Exception as e:  # ORT raises its own exception types
            raise EpLoadError(f"ONNX Runtime {ort.__version__} could not load {path}: {e}") from e
        if not ep_devices():
            raise EpLoadError(f"{path} loaded but offers no {EP_NAME} device to ONNX Runtime {ort.__version__}.")
        _registered_path = path
        return path


def ep_devices() -> list:
    """ORT's devices for OptimEP (empty before register())."""
    return [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]


def registered_api_version() -> int | None:
    """The ORT API version agreed with the library, or None when it is not registered."""
    return API_VERSION if _registered_path is not None else None
