"""Reading and writing models: external data in and out, atomic writes, and handing models over
2 GB (protobuf's limit for one message) to ONNX Runtime and the checker through a file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import onnx

from optim.common.staging import staged_output, staged_size

from .errors import OptimizeError

# Serialized models above this go through a file with external data (protobuf refuses 2 GB).
INLINE_LIMIT = (1 << 31) - (64 << 20)


def load_model(model: str | os.PathLike | bytes | onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    """A private copy of `model` with its weights loaded, and whether the file kept weights as
    external data (the output then does too). Raises OptimizeError for files that are not ONNX."""
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy, False
    if isinstance(model, bytes):
        try:
            return onnx.load_from_string(model), False
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise OptimizeError("the bytes given are not an ONNX model (onnx could not parse them)") from None
    path = Path(model)
    try:
        loaded = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001
        raise OptimizeError(f"{path} is not an ONNX model (onnx could not parse it)") from None
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in loaded.graph.initializer)
    if external:
        try:
            onnx.load_external_data_for_model(loaded, str(path.parent))
        except OSError as e:
            raise OptimizeError(f"{path} keeps its weights in an external file that cannot be read: {e}") from None
    return loaded, external


def save_model(model: onnx.ModelProto, path: str | os.PathLike, external: bool = False) -> int:
    """Writes `model` to `path` without ever leaving a partial or unchecked file there: staged beside
    it (optim.common.staging), checked by onnx.checker, then moved over the target (data file first).
    Weights go to `<name>.data` beside it when `external` or when the model is too large to inline.
    Returns the bytes written; OptimizeError when `path` is a folder or cannot be written."""
    with staged_output(path, error=OptimizeError, example="model.opt.onnx") as staged:
        if external or model.ByteSize() > INLINE_LIMIT:
            to_save = onnx.ModelProto()
            to_save.CopyFrom(model)  # saving with external data rewrites the tensors it is given
            onnx.save_model(to_save, str(staged), save_as_external_data=True, all_tensors_to_one_file=True,
                            location=f"{staged.name}.data", size_threshold=1024)
        else:
            onnx.save_model(model, str(staged))
        onnx.checker.check_model(str(staged))
        return staged_size(staged)


@contextlib.contextmanager
def model_source(model: onnx.ModelProto) -> Iterator[onnx.ModelProto | str]:
    """The model itself when it fits in one protobuf message, else the path of a temporary copy
    with external data (what ORT sessions and onnx.checker accept for large models)."""
    if model.ByteSize() <= INLINE_LIMIT:
        yield model
        return
    with tempfile.TemporaryDirectory(prefix="optim-optimize-") as folder:
        path = os.path.join(folder, "model.onnx")
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        onnx.save_model(copy, path, save_as_external_data=True, location="model.onnx.data")
        yield path
