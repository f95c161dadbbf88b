"""What kind of PyTorch file a path holds, told from its contents without loading (or unpickling) it.

All current PyTorch formats are zip archives with one top folder. Markers, checked on files
written by torch 2.13:
  TorchScript (torch.jit.save):     <top>/constants.pkl and <top>/code/...
  torch.export (torch.export.save): <top>/archive_format (holding "pt2") and <top>/models/...
  torch.save (state_dict, module):  <top>/data.pkl only; the pickle's globals tell a plain
                                    state_dict (tensors in dicts) from pickled Python objects.
"""

from __future__ import annotations

import os
import pickletools
import zipfile

from .errors import ExportError

TORCHSCRIPT = "torchscript"
TORCH_EXPORT = "torch.export"
STATE_DICT = "state_dict"
PICKLE = "pickle"

# Globals a weights-only torch.save pickle refers to: tensor and storage rebuilding, dtypes,
# OrderedDict. Anything else (a module class, numpy, user classes) needs real unpickling.
_SAFE_MODULES = {"torch", "torch._utils", "torch._tensor", "_codecs"}
_SAFE_GLOBALS = {("collections", "OrderedDict"), ("builtins", "set"), ("__builtin__", "set")}


def detect_kind(path: str | os.PathLike) -> tuple[str, str]:
    """(kind, detail) for the file at path: kind is TORCHSCRIPT, TORCH_EXPORT, STATE_DICT or
    PICKLE; detail names the first non-tensor class a PICKLE refers to (else "").

    Raises ExportError for a missing file, a directory, an ONNX file, a non-zip file, a truncated
    zip and a zip PyTorch did not write.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ExportError(f"{path} does not exist")
    if os.path.isdir(path):
        raise ExportError(f"{path} is a directory, not a PyTorch model file")
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            if f.read(4) == b"PK\x03\x04":  # a zip's first entry, but no directory at the end: cut short
                raise ExportError(f"{path} is a damaged zip archive (truncated: it has no zip directory at its end): "
                                  f"copy or save the model again")
        if path.endswith(".onnx"):
            raise ExportError(f"{path} is already an ONNX model: give `optim optimize` or `optim run` that file instead")
        raise ExportError(
            f"{path} is not a PyTorch archive (not a zip file): expected a TorchScript archive (torch.jit.save), "
            f"a torch.export archive (.pt2) or a file written by torch.save"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            members = {n.split("/", 1)[1] for n in names if "/" in n}
            if "constants.pkl" in members and any(m.startswith("code/") for m in members):
                return TORCHSCRIPT, ""
            if "archive_format" in members and any(m.startswith("models/") for m in members):
                return TORCH_EXPORT, ""
            if "data.pkl" in members:
                pickle_name = next(n for n in names if n.endswith("/data.pkl") and n.count("/") == 1)
                unsafe = _first_unsafe_global(archive.read(pickle_name))
                return (PICKLE, unsafe) if unsafe else (STATE_DICT, "")
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ExportError(f"{path} is a damaged zip archive ({e}): save the model again") from None
    raise ExportError(f"{path} is a zip archive but not one PyTorch wrote (no TorchScript, torch.export or torch.save markers)")


def _first_unsafe_global(data: bytes) -> str:
    """The first 'module.name' the pickle imports beyond tensors and dicts, or ''.

    Walks the opcodes only (pickletools never executes anything). Protocol 2 (torch.save's
    default) names globals inline; protocol 4+ pushes two strings before STACK_GLOBAL, which
    may come from the memo, so strings are tracked through it.
    """
    recent: list[str | None] = [None, None]  # the last two values pushed, None if not a string
    memo: dict[int, str | None] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "MEMOIZE":
                memo[len(memo)] = recent[-1]
                continue
            if op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg)] = recent[-1]
                continue
            if op.name == "GLOBAL":
                module, name = arg.split(" ", 1)
            elif op.name == "STACK_GLOBAL" and None not in recent:
                module, name = recent
            else:
                if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
                    pushed = arg
                elif op.name in ("BINGET", "LONG_BINGET", "GET"):
                    pushed = memo.get(int(arg))
                else:
                    pushed = None
                recent = [recent[-1], pushed]
                continue
            recent = [recent[-1], None]
            if module not in _SAFE_MODULES and (module, name) not in _SAFE_GLOBALS:
                return f"{module}.{name}"
    except Exception as e:  # a truncated or foreign pickle: never treat it as safe
        return f"unreadable pickle ({type(e).__name__})"
    return ""
