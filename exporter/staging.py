"""Writing the ONNX file so that a failed export leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from .errors import ExportError


@contextlib.contextmanager
def staged_output(path: str | os.PathLike):
    """Yields a path with the target's file name inside a fresh hidden folder beside the target.

    If the block succeeds, every file written in that folder (the model and any external-data
    file the exporter wrote beside it) is moved over the targets with os.replace; otherwise the
    folder is deleted and an existing target stays as it was. The folder sits in the target's
    own directory so the rename never crosses file systems, and the staged file carries the
    final name so external-data references inside the model stay right after the move.
    Raises ExportError when the target is a directory or its folder cannot be written.
    """
    target = Path(path)
    if target.is_dir():
        raise ExportError(f"output {target} is a directory: give a file name such as {target / 'model.onnx'}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as e:
        raise ExportError(f"cannot write {target}: {e.strerror or e}") from None
    try:
        yield stage / target.name
        # Data files first, the model last: a visible model file always has its data beside it.
        for f in sorted(stage.iterdir(), key=lambda p: p.name == target.name):
            os.replace(f, target.parent / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
