"""Output files that appear whole or not at all: written under their final name in a hidden folder beside
the target, then renamed over it, so a failed or interrupted command never leaves a partial file (nor
replaces a good one)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_output(path: str | os.PathLike, *, error: type[Exception] = ValueError,
                  example: str = "model.onnx") -> Iterator[Path]:
    """Yields a path with the target's file name inside a fresh hidden folder beside the target.

    Write the file there, and any files that go beside it (a model's external data). If the block
    succeeds, every file in that folder is moved over its target with os.replace, the target's own
    name last, so a visible model always has its data beside it; otherwise nothing is moved and an
    existing target stays as it was. The folder sits in the target's directory so the rename never
    crosses file systems, and the staged file carries the final name so references to the files
    beside it stay right after the move. Files get the usual permissions (umask), not a temporary
    file's private ones.

    Raises `error` (one sentence, naming `example` as a file name to give) when the target is a
    directory or its folder cannot be written.
    """
    target = Path(path)
    if target.is_dir():
        raise error(f"output {target} is a directory: give a file name such as {target / example}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as e:
        raise error(f"cannot write {target}: {e.strerror or e}") from None
    try:
        yield stage / target.name
        for f in sorted(stage.iterdir(), key=lambda p: p.name == target.name):
            os.replace(f, target.parent / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def staged_size(staged: Path) -> int:
    """Bytes of the files staged so far beside `staged` (the path staged_output yielded), before they move."""
    return sum(f.stat().st_size for f in staged.parent.iterdir())
