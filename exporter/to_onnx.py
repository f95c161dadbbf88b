"""Running the torch ONNX exporters: dynamo (torch.export based) or TorchScript, with fallback."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

import onnx
import torch

from .baked_args import BakedArgs, is_scripted, traced_for_export
from .errors import ExportError
from .loading import LoadedModel
from .locate import op_location
from .quiet import quiet
from .specs import InputSpec

log = logging.getLogger("optim.exporter")

DYNAMO = "dynamo"
TORCHSCRIPT = "torchscript"
EXPORTERS = ("auto", DYNAMO, TORCHSCRIPT)

# Above this many bytes of weights the dynamo exporter writes them to "<model>.onnx.data":
# a single protobuf cannot exceed 2 GiB, and the graph needs room beside the weights.
EXTERNAL_DATA_BYTES = 1536 * 2**20

# How exporters name an op they cannot translate, newest torch first.
_UNSUPPORTED_OP = [
    re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)'"),
    re.compile(r"Unsupported FX nodes: \{'call_function': \[([^\]]+)\]"),
    re.compile(r"Exporting the operator '?([\w:.]+)'? to ONNX opset version"),
    re.compile(r"unrecognized namespace ([\w:.]+)"),
]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def export_onnx(loaded: LoadedModel, args: tuple, specs: list[InputSpec], output_names: list[str],
                opset: int, exporter: str, path: Path, verbose: bool = False,
                progress: Callable[[str], None] | None = None) -> str:
    """Writes the model to `path` as ONNX; returns the exporter that did it (DYNAMO or TORCHSCRIPT).

    "auto" tries dynamo first and falls back to TorchScript; a ScriptModule goes straight to the
    TorchScript exporter, the only one that reads TorchScript. Dynamic axes come out under the
    specs' dim names. progress(str) gets a line as each exporter starts. Raises ExportError naming
    an op no exporter could translate and the module that calls it.
    """
    say = progress or (lambda _line: None)
    if exporter not in EXPORTERS:
        raise ExportError(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}")
    scripted = is_scripted(loaded.module)
    if exporter == DYNAMO and scripted:
        raise ExportError(
            f"the dynamo exporter cannot read TorchScript ({loaded.source} is a ScriptModule; torch.export needs the "
            f"model's Python code): use --exporter torchscript or auto"
        )
    if exporter == TORCHSCRIPT and loaded.program is not None:
        raise ExportError(
            f"the TorchScript exporter cannot take a torch.export archive ({loaded.source}; its module cannot be "
            f"traced): use --exporter dynamo or auto"
        )
    # Each source has one exporter that can read it, except Python modules, which have both.
    possible = [TORCHSCRIPT] if scripted else [DYNAMO] if loaded.program is not None else [DYNAMO, TORCHSCRIPT]
    order = possible if exporter == "auto" else [exporter]
    failures: list[tuple[str, BaseException]] = []
    for name in order:
        say(f"exporting with the {name} exporter (opset {opset})")
        try:
            with quiet(verbose):
                (_dynamo if name == DYNAMO else _torchscript)(loaded, args, specs, output_names, opset, path, verbose)
            # An exporter that fixed an axis asked to be dynamic (dynamo does for an LSTM's batch) failed too.
            name_dynamic_axes(path, specs)
        except Exception as e:
            failures.append((name, e))
            _remove_partial(path)
            if name != order[-1]:
                log.info("the %s exporter failed (%s); trying the %s exporter", name, _summary(e), order[-1])
                say(f"the {name} exporter failed; trying the {order[-1]} exporter")
            continue
        return name
    if len(failures) == 1 and isinstance(failures[0][1], ExportError):
        raise failures[0][1]  # already one sentence with its fix
    op = next((op for _, e in failures if (op := unsupported_op(e))), None)
    where = op_location(loaded, args, op) if op else None
    raise ExportError(_failure_message(failures, opset, [n for n in possible if n not in order], op, where))


def _dynamo(loaded, args, specs, output_names, opset, path, verbose) -> None:
    if loaded.program is not None:
        model, dynamic_shapes = loaded.program, None  # the program carries its own dynamic axes
    else:
        model, dynamic_shapes = loaded.module, torch_dynamic_shapes(specs)
        if dynamic_shapes is not None and isinstance(model, BakedArgs):
            dynamic_shapes = (dynamic_shapes,)  # its forward(*tensors) is one tuple argument to torch.export
    torch.onnx.export(
        model, args, str(path), dynamo=True, input_names=[s.name for s in specs], output_names=output_names,
        opset_version=opset, dynamic_shapes=dynamic_shapes, external_data=_weight_bytes(loaded) > EXTERNAL_DATA_BYTES,
        verbose=verbose,
    )


def torch_dynamic_shapes(specs: list[InputSpec]) -> tuple | None:
    """torch.export's dynamic_shapes for the specs (in forward's order), None when no axis is dynamic. One Dim
    object per name: torch.export treats axes sharing a Dim as equal in size."""
    dims: dict = {}
    per_input = [{axis: dims.setdefault(n, torch.export.Dim(n)) for axis, n in s.dynamic.items()} or None for s in specs]
    return tuple(per_input) if dims else None


def _torchscript(loaded, args, specs, output_names, opset, path, verbose) -> None:
    dynamic_axes = {s.name: dict(s.dynamic) for s in specs if s.dynamic}
    torch.onnx.export(
        traced_for_export(loaded.module, args), args, str(path), dynamo=False, input_names=[s.name for s in specs], output_names=output_names,
        opset_version=opset, dynamic_axes=dynamic_axes or None, verbose=verbose,
    )


def name_dynamic_axes(path: Path, specs: list[InputSpec]) -> None:
    """Renames the ONNX file's symbolic dims to the specs' dim names (a .pt2 comes out with torch's
    symbols, s0, s1, ...) and checks every dynamic axis really is symbolic.

    Rewrites the file only when a name changes; external data stays where it is.
    """
    model = onnx.load(str(path), load_external_data=False)
    graph_inputs = {i.name: i for i in model.graph.input}
    renames: dict[str, str] = {}
    for spec in specs:
        value = graph_inputs.get(spec.name)
        if value is None:
            continue  # the TorchScript exporter drops inputs the graph does not use
        dims = value.type.tensor_type.shape.dim
        for axis, dim_name in spec.dynamic.items():
            dim = dims[axis]
            if not dim.HasField("dim_param"):
                raise ExportError(
                    f"the exporter fixed axis {axis} of input {spec.name!r} to {dim.dim_value} although it was marked "
                    f"dynamic: the model specialises on that size; export with a static shape or try the other exporter"
                )
            if dim.dim_param != dim_name:
                renames[dim.dim_param] = dim_name
    if not renames:
        return
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in renames:
                dim.dim_param = renames[dim.dim_param]
    onnx.save(model, str(path))


def _weight_bytes(loaded: LoadedModel) -> int:
    # ExportedProgram.state_dict is a property; nn.Module.state_dict a method.
    state = loaded.program.state_dict if loaded.program is not None else loaded.module.state_dict()
    tensors = list(state.values())
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _remove_partial(path: Path) -> None:
    for leftover in (path, Path(f"{path}.data")):
        if leftover.exists():
            os.remove(leftover)


# Where PyTorch tracks exporter bugs, so a user with a model that should export can report it.
PYTORCH_ISSUES = "https://github.com/pytorch/pytorch/issues (label 'module: onnx')"


def _failure_message(failures: list[tuple[str, BaseException]], opset: int, untried: list[str],
                     op: str | None, where: str | None) -> str:
    details = "; ".join(f"{name} exporter: {_summary(e)}" for name, e in failures)
    fixes = [f"--exporter {name}" for name in untried] + [f"another --opset than {opset}"]
    if op:
        where = f" in {where}" if where else ""
        # Ops of PyTorch's own namespaces should translate: a missing one is PyTorch's to fix.
        pytorch_op = op.replace("::", ".").split(".")[0] in ("aten", "prims")
        report = f", or report the missing translation at {PYTORCH_ISSUES}" if pytorch_op else ""
        return (f"ONNX export failed: the model uses {op}{where}, which has no ONNX translation at opset {opset} "
                f"({details}); try {' or '.join(fixes)}, or replace that op in the model{report}")
    return (f"ONNX export failed ({details}); try {' or '.join(fixes)}, or --verbose for the exporter's output; "
            f"if the model should export, report it at {PYTORCH_ISSUES}")


def unsupported_op(error: BaseException) -> str | None:
    """The op an exporter error says it could not translate ('aten::foo', 'mylib.op'), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = _ANSI.sub("", str(error))
        for pattern in _UNSUPPORTED_OP:
            if m := pattern.search(text):
                return m.group(1).strip("'\" ").rstrip(".")
        error = error.__cause__ or error.__context__
    return None


def _summary(error: BaseException) -> str:
    """One line saying why an exporter failed; torch.onnx wraps the real cause in a long report."""
    text = _ANSI.sub("", str(error))
    if m := re.search(r"## Exception summary\s*\n\s*(?:<class '[\w.]*?(\w+)'>: )?(.+)", text):
        line = f"{m.group(1)}: {m.group(2)}" if m.group(1) else m.group(2)
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        line = f"{type(error).__name__}: {lines[0] if lines else ''}"
    return line if len(line) <= 300 else line[:297] + "..."
