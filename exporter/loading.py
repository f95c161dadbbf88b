"""Turning a SPEC (a file, a zoo model name or package.module:factory) into a PyTorch model to export.

Files are told apart by their contents (see detect.py). Only a fully pickled nn.Module needs
real unpickling, and it happens only with trust_pickle=True; everything else loads through
torch's safe loaders (torch.jit.load, torch.export.load, torch.load(weights_only=True)).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from optim.models import COVERAGE, EXTRA, LLM, REALSIZE, ZOO, example_inputs as zoo_example_inputs, get as zoo_get

from . import detect
from .errors import ExportError, first_line
from .specs import DYNAMIC_EXAMPLE_SIZE, InputSpec, default_dim_name


# Result kinds, as ExportResult.kind reports them.
ZOO_KIND = "zoo"
FACTORY_KIND = "factory"
PICKLED_KIND = "pickled module"
HF_FOLDER_KIND = "hugging face folder"

_KIND_DESCRIPTIONS = {
    ZOO_KIND: "a zoo model",
    FACTORY_KIND: "a factory's model",
    detect.TORCHSCRIPT: "a TorchScript archive (told from its contents)",
    detect.TORCH_EXPORT: "a torch.export archive (told from its contents)",
    PICKLED_KIND: "a pickled nn.Module (told from its contents; unpickled as --trust-pickle allowed)",
    HF_FOLDER_KIND: "a Hugging Face model folder (config.json and weights)",
}

_FACTORY_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")


@dataclass
class LoadedModel:
    """A model ready to export, and what its source says about its inputs.

    `module` runs the PyTorch reference (for a .pt2, the program's module). `program` is the
    ExportedProgram of a .pt2, which the dynamo exporter takes as it is. `inputs` and `example`
    are None unless the source defines them (zoo entries; .pt2 archives, whose dynamic axes are
    fixed by the archive). `parameters` lists forward's (name, required) pairs, None when
    forward takes *args.
    """

    module: Any
    kind: str
    source: str
    program: Any = None
    inputs: list[InputSpec] | None = None
    example: dict[str, np.ndarray] | None = None
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    parameters: list[tuple[str, bool]] | None = None


def load_model(spec: str, weights: str | os.PathLike | None = None, trust_pickle: bool = False) -> LoadedModel:
    """Loads SPEC: an existing file first, then a zoo name, then package.module:factory.

    `weights` (a state_dict file) applies to zoo and factory specs. Raises ExportError with the
    fix for every user mistake: missing file, foreign file, pickled module without trust_pickle,
    factory that cannot be imported, is not callable, raises or returns something else.
    """
    spec = os.fspath(spec)
    if os.path.isdir(spec):
        loaded = _load_hf_folder(spec)
    elif os.path.exists(spec):
        loaded = _load_file(spec, trust_pickle)
        if weights is not None:
            raise ExportError(
                f"--weights applies to module:factory specs; {spec} is a {loaded.kind} file that carries its own weights"
            )
    elif spec in ZOO or spec in EXTRA or spec in REALSIZE or spec in COVERAGE or spec in LLM:
        loaded = _load_zoo(spec)
    elif _FACTORY_SPEC.match(spec):
        loaded = _load_factory(spec)
    else:
        raise ExportError(
            f"{spec} does not exist, and it is neither a zoo model ({', '.join([*ZOO, *EXTRA, *REALSIZE, *COVERAGE, *LLM])}) nor a "
            f"package.module:factory spec"
        )
    if weights is not None:
        _load_weights(loaded, os.fspath(weights))
    if loaded.program is None:
        loaded.module.eval()  # export for inference: dropout off, BatchNorm on running statistics
    loaded.parameters = forward_parameters(loaded.module)
    return loaded


def describe_kind(kind: str) -> str:
    """'a TorchScript archive (told from its contents)' for LoadedModel.kind, for progress lines."""
    return _KIND_DESCRIPTIONS.get(kind, kind)


def _load_hf_folder(path: str) -> LoadedModel:
    from optim.models.causal_lm import is_hf_folder, load_folder

    if not is_hf_folder(path):
        raise ExportError(f"{path} is a folder without a config.json: give a model file, or a Hugging Face model folder")
    try:
        module = load_folder(path)
    except ValueError as e:
        raise ExportError(str(e)) from None
    except Exception as e:
        raise ExportError(f"transformers cannot load the model in {path} ({type(e).__name__}: {first_line(e)})") from None
    return LoadedModel(module, HF_FOLDER_KIND, path)


def _load_file(path: str, trust_pickle: bool) -> LoadedModel:
    kind, detail = detect.detect_kind(path)
    if kind == detect.TORCHSCRIPT:
        try:
            # torch 2.13 marks TorchScript deprecated on every load; the user chose this format.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                module = torch.jit.load(path, map_location="cpu")
        except Exception as e:
            raise ExportError(f"{path} looks like a TorchScript archive but torch.jit.load failed ({first_line(e)}): "
                              f"it is damaged or from another torch version; save it again with torch.jit.save") from None
        return LoadedModel(module, detect.TORCHSCRIPT, path)
    if kind == detect.TORCH_EXPORT:
        return _load_program(path)
    if kind == detect.STATE_DICT:
        raise ExportError(
            f"{path} holds only weights (a state_dict or tensors), not a model: give the code that builds the model "
            f"as package.module:factory and pass this file with --weights {path}"
        )
    if not trust_pickle:
        raise ExportError(
            f"{path} is a fully pickled Python object ({detail}) and unpickling it runs arbitrary code from the file, "
            f"so it loads only with --trust-pickle (trust_pickle=True); safer formats: a TorchScript archive "
            f"(torch.jit.save), a torch.export archive (torch.export.save, .pt2), or a package.module:factory spec "
            f"with its state_dict passed as --weights"
        )
    try:
        # The one place optim unpickles arbitrary objects, and only because the caller said so.
        module = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ExportError(
            f"unpickling {path} failed ({type(e).__name__}: {first_line(e)}); the code of {detail} must be importable"
        ) from None
    if not isinstance(module, nn.Module):
        raise ExportError(f"{path} holds a {type(module).__name__}, not a torch.nn.Module")
    return LoadedModel(module, PICKLED_KIND, path)


def _load_program(path: str) -> LoadedModel:
    try:
        program = torch.export.load(path)
    except Exception as e:
        raise ExportError(f"{path} looks like a torch.export archive but torch.export.load failed ({first_line(e)}): "
                          f"it is damaged or from another torch version; save it again with torch.export.save") from None
    inputs, example = _program_inputs(program)
    return LoadedModel(program.module(), detect.TORCH_EXPORT, path, program=program, inputs=inputs, example=example)


def _program_inputs(program) -> tuple[list[InputSpec], dict[str, np.ndarray] | None]:
    """Input specs from the program's placeholders (symbolic sizes are its dynamic axes) and the
    example inputs saved in the archive, when there are any."""
    names = list(program.graph_signature.user_inputs)
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    example = None
    saved = getattr(program, "example_inputs", None)
    if saved:
        args, kwargs = saved
        flat = list(args) + list(kwargs.values())
        if len(flat) == len(names) and all(isinstance(t, torch.Tensor) for t in flat):
            example = {n: t.detach().cpu().numpy() for n, t in zip(names, flat)}
    specs = []
    symbol_names: dict[str, str] = {}  # torch's symbols (s0, s72) mean nothing to users; name them after an input axis
    for name in names:
        value = nodes[name].meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise ExportError(f"the exported program's input {name!r} is not a tensor; only tensor inputs can become ONNX inputs")
        shape, dynamic = [], {}
        for axis, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt):
                # Axes sharing a symbol must stay equal, so they share the name too.
                dynamic[axis] = symbol_names.setdefault(str(size), default_dim_name(name, axis))
                hint = size.node.hint
                shape.append(int(hint) if hint is not None else DYNAMIC_EXAMPLE_SIZE)
            else:
                shape.append(int(size))
        if example is not None:
            shape = list(example[name].shape)
        specs.append(InputSpec(name, tuple(shape), numpy_dtype(value.dtype), dynamic))
    return specs, example


def _load_zoo(name: str) -> LoadedModel:
    entry = zoo_get(name)
    inputs = [InputSpec(n, tuple(shape), dtype, dict(entry.dynamic.get(n, {}))) for n, shape, dtype in entry.inputs]
    return LoadedModel(entry.factory(), ZOO_KIND, name, inputs=inputs, example=zoo_example_inputs(entry),
                       int_ranges=dict(entry.int_ranges))


def _load_factory(spec: str) -> LoadedModel:
    module_name, attr = spec.split(":")
    with _cwd_importable():
        try:
            target = importlib.import_module(module_name)
        except ImportError as e:
            raise ExportError(
                f"cannot import {module_name!r} for {spec} ({type(e).__name__}: {e}); run from the folder that holds it "
                f"or put it on PYTHONPATH"
            ) from None
        except Exception as e:
            raise ExportError(f"importing {module_name!r} for {spec} raised {type(e).__name__}: {first_line(e)}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ExportError(f"{module_name!r} has no attribute {attr!r}, so {spec} names nothing")
        target = getattr(target, part)
    if isinstance(target, nn.Module):  # a module-level model instance is as good as a factory
        return LoadedModel(target, FACTORY_KIND, spec)
    if not callable(target):
        raise ExportError(f"{spec} is a {type(target).__name__}, not a callable that returns a torch.nn.Module")
    try:
        module = target()
    except Exception as e:
        raise ExportError(f"factory {spec} raised {type(e).__name__}: {first_line(e)}") from None
    if not isinstance(module, nn.Module):
        raise ExportError(f"factory {spec} returned a {type(module).__name__}, not a torch.nn.Module")
    return LoadedModel(module, FACTORY_KIND, spec)


@contextlib.contextmanager
def _cwd_importable():
    # The `optim` console script, unlike `python -m`, does not put the working directory on
    # sys.path, so `optim export mymodels:build` would not find ./mymodels.py without this.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _load_weights(loaded: LoadedModel, path: str) -> None:
    kind, detail = detect.detect_kind(path)
    if kind == detect.PICKLE:
        raise ExportError(f"--weights {path} holds pickled Python objects ({detail}), not a plain state_dict: "
                          f"save model.state_dict() with torch.save")
    if kind != detect.STATE_DICT:
        raise ExportError(f"--weights {path} is a whole {kind} archive: give it as the model SPEC instead")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ExportError(f"--weights {path} could not be loaded as a state_dict ({type(e).__name__}: {first_line(e)})") from None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        keys = ", ".join(list(map(str, state))[:4]) if isinstance(state, Mapping) else type(state).__name__
        raise ExportError(f"--weights {path} is not a state_dict of tensors ({keys}): save model.state_dict() with torch.save")
    try:
        result = loaded.module.load_state_dict(state, strict=False)
    except RuntimeError as e:  # size mismatches raise even with strict=False
        raise ExportError(f"--weights {path} do not fit {loaded.source}: {' '.join(str(e).split())}") from None
    if result.missing_keys or result.unexpected_keys:
        raise ExportError(
            f"--weights {path} do not fit {loaded.source}: missing {_few(result.missing_keys)}, "
            f"unexpected {_few(result.unexpected_keys)}"
        )


def forward_parameters(module) -> list[tuple[str, bool]] | None:
    """forward's parameters as (name, required), in order; None when it takes *args or **kwargs."""
    if isinstance(module, torch.jit.ScriptModule):
        arguments = module.forward.schema.arguments[1:]  # [0] is self
        return [(a.name, not a.has_default_value()) for a in arguments]
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return None
    params = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None
        params.append((p.name, p.default is p.empty))
    return params


_NUMPY_DTYPES = {
    torch.float32: "float32", torch.float16: "float16", torch.float64: "float64", torch.int64: "int64",
    torch.int32: "int32", torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}


def numpy_dtype(dtype: torch.dtype) -> str:
    """The numpy name of a torch dtype; ExportError for dtypes numpy has not (bfloat16, complex)."""
    try:
        return _NUMPY_DTYPES[dtype]
    except KeyError:
        raise ExportError(f"inputs of dtype {dtype} are not supported (numpy has no such type)") from None


def _few(keys: list[str]) -> str:
    return "none" if not keys else ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

