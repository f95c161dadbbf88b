"""`--arg NAME=VALUE`: a Python int, float or bool argument of forward, fixed for the export.

The value is baked into the graph: the exported model does not take it as an input, and a branch on
it (`if sr == 16000:`) is decided at export time. The module is wrapped so that every exporter and
the PyTorch reference call forward with the value by keyword.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from .errors import ExportError
from .loading import LoadedModel

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BOOLS = {"true": True, "false": False}
Scalar = bool | int | float


def parse_arg(text: str) -> tuple[str, Scalar]:
    """'sr=16000' -> ('sr', 16000); 'scale=0.5' -> 0.5; 'flag=true' -> True. ExportError on bad text."""
    name, sep, value = text.partition("=")
    if not sep or not _NAME.match(name) or not value:
        raise ExportError(f"bad --arg {text!r}: expected NAME=VALUE with an int, float or true/false value, e.g. sr=16000")
    return name, _literal(text, value)


def _literal(text: str, value: str) -> Scalar:
    if value.lower() in _BOOLS:
        return _BOOLS[value.lower()]
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        raise ExportError(f"bad --arg {text!r}: {value!r} is not an int, a float or true/false") from None


class BakedArgs(nn.Module):
    """Calls `inner` with the tensors by name and the baked values by keyword."""

    def __init__(self, inner: nn.Module, tensor_names: Sequence[str], values: Mapping[str, Scalar]):
        super().__init__()
        self.inner = inner
        self.tensor_names = list(tensor_names)
        self.values = dict(values)

    def forward(self, *tensors):
        return self.inner(**dict(zip(self.tensor_names, tensors)), **self.values)


def bake_args(loaded: LoadedModel, args: Sequence[str] | Mapping[str, Scalar]) -> dict[str, Scalar]:
    """Wraps loaded.module so that forward's named non-tensor arguments get the given values; returns them
    as passed (each converted to the parameter's declared int/float/bool type where forward declares one).

    Raises ExportError for a .pt2 archive (its program was specialised when it was saved), a name forward
    does not take, a name given twice, or a value that does not fit the declared type.
    """
    values = _collect(args)
    if not values:
        return {}
    if loaded.program is not None:
        raise ExportError(f"--arg cannot change {loaded.source}: a torch.export archive fixed its non-tensor arguments "
                          f"when it was exported")
    if loaded.parameters is None:
        raise ExportError(f"--arg needs named parameters, but the model's forward takes *args or **kwargs")
    names = [name for name, _ in loaded.parameters]
    declared = _declared_types(loaded.module)
    for name, value in list(values.items()):
        if name not in names:
            raise ExportError(f"--arg {name}: the model's forward({', '.join(names)}) has no parameter {name!r}")
        values[name] = _fit(name, value, declared.get(name))
    remaining = [(name, required) for name, required in loaded.parameters if name not in values]
    loaded.module = BakedArgs(loaded.module, [name for name, _ in remaining], values).eval()
    loaded.parameters = remaining
    return values


def _collect(args: Sequence[str] | Mapping[str, Scalar]) -> dict[str, Scalar]:
    if isinstance(args, Mapping):
        return {str(k): v for k, v in args.items()}
    if isinstance(args, str):  # one "sr=16000" given where a list was meant
        args = [args]
    values: dict[str, Scalar] = {}
    for text in args:
        name, value = parse_arg(text)
        if name in values:
            raise ExportError(f"--arg {name} is given twice")
        values[name] = value
    return values


def _declared_types(module) -> dict[str, type]:
    """forward's parameters declared int, float or bool (TorchScript schema or Python annotations)."""
    found: dict[str, type] = {}
    if isinstance(module, torch.jit.ScriptModule):
        kinds = {"int": int, "float": float, "bool": bool}
        for a in module.forward.schema.arguments[1:]:
            if str(a.type) in kinds:
                found[a.name] = kinds[str(a.type)]
        return found
    import inspect

    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return found
    for p in params:
        if p.annotation in (int, float, bool) or p.annotation in ("int", "float", "bool"):
            found[p.name] = {"int": int, "float": float, "bool": bool}.get(p.annotation, p.annotation)
    return found


def _fit(name: str, value: Scalar, declared: type | None) -> Scalar:
    if declared is None or type(value) is declared:
        return value
    if declared is float and type(value) is int:
        return float(value)
    kind = "true/false" if declared is bool else f"an {declared.__name__}" if declared is int else "a float"
    raise ExportError(f"--arg {name}={value!r}: forward declares {name} as {declared.__name__}, so give {kind}")


def is_scripted(module) -> bool:
    """A ScriptModule, or one wrapped by BakedArgs: only the TorchScript exporter reads it."""
    return isinstance(module.inner if isinstance(module, BakedArgs) else module, torch.jit.ScriptModule)


def traced_for_export(module, args: tuple):
    """What the TorchScript exporter should take: a BakedArgs around a ScriptModule traced first (the exporter
    cannot trace into a ScriptModule itself; traced, the baked values become constants and a branch on them
    folds away); any other module as it is."""
    if not (isinstance(module, BakedArgs) and is_scripted(module)):
        return module
    return torch.jit.trace(module, args, check_trace=False, strict=False)
