"""Where inside a model an op is called, so that an export error can name the module to change.

Asked only after an export failed, with the op name the exporter's error gave. Eager modules
are run once on the example inputs while hooks track the module path and a dispatch mode
watches every op; TorchScript modules are searched graph by graph; a torch.export program
carries the module path of each node in its metadata.
"""

from __future__ import annotations

import contextlib
import logging

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .errors import first_line
from .loading import LoadedModel

log = logging.getLogger("optim.exporter")


def op_location(loaded: LoadedModel, args: tuple, op: str) -> str | None:
    """'module blocks.1 (Inner)' for the innermost module whose own code calls `op` ('aten::foo',
    'mylib.op', 'mylib.op.default'), 'the top-level module (Net)' when forward itself calls it,
    or None when the op cannot be found (or looking for it fails: this is only for a message).
    """
    wanted = _canonical(op)
    try:
        if loaded.program is not None:
            found = _in_program(loaded.program, wanted)
        elif isinstance(loaded.module, torch.jit.ScriptModule):
            found = _in_script(loaded.module, wanted)
        else:
            found = _in_eager_run(loaded.module, args, wanted)
    except Exception as e:  # the model already failed to export; never hide that error behind this one
        log.debug("could not locate %s in the model: %s", op, first_line(e))
        return None
    if found is None:
        return None
    path, type_name = found
    return f"module {path} ({type_name})" if path else f"the top-level module ({type_name})"


def _canonical(op: str) -> str:
    """'optimtest::twice', 'optimtest.twice' and 'optimtest.twice.default' all become 'optimtest.twice'."""
    name = op.replace("::", ".")
    return name[: -len(".default")] if name.endswith(".default") else name


def _matches(qualified: str, overload: str, wanted: str) -> bool:
    # Errors name an op with or without its overload (aten.add.Tensor, aten.add).
    base = qualified.replace("::", ".")
    return wanted in (base, f"{base}.{overload}" if overload else base)


def _in_program(program, wanted: str) -> tuple[str, str] | None:
    for node in program.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if _matches(target._schema.name, target._overloadname, wanted):
            stack = node.meta.get("nn_module_stack") or {}
            if not stack:
                return "", type(program.module()).__name__
            path, type_name = list(stack.values())[-1]
            return path, _short(type_name)
    return None


def _in_script(module: torch.jit.ScriptModule, wanted: str) -> tuple[str, str] | None:
    # Deepest first (the root, "", has depth 0): a parent's graph calls its children's methods
    # (prim::CallMethod), the op itself stands only in the graph of the module that calls it.
    def depth(item):
        return item[0].count(".") + 1 if item[0] else 0

    for path, sub in sorted(module.named_modules(), key=depth, reverse=True):
        graph = getattr(sub, "graph", None)
        if graph is not None and any(_matches(n.kind(), "", wanted) for n in _all_nodes(graph.nodes())):
            return path, sub.original_name
    return None


def _all_nodes(nodes):
    for node in nodes:
        yield node
        for block in node.blocks():  # the bodies of If and Loop
            yield from _all_nodes(block.nodes())


def _in_eager_run(module: torch.nn.Module, args: tuple, wanted: str) -> tuple[str, str] | None:
    stack: list[tuple[str, str]] = [("", type(module).__name__)]
    seen: list[tuple[str, str]] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, call_args=(), kwargs=None):
            if not seen and _matches(func._schema.name, func._overloadname, wanted):
                seen.append(stack[-1])
            return func(*call_args, **(kwargs or {}))

    with contextlib.ExitStack() as hooks:
        for path, sub in module.named_modules():
            if not path:
                continue

            def enter(_m, _a, path=path, sub=sub):
                stack.append((path, type(sub).__name__))

            def leave(_m, _a, _out):
                stack.pop()

            hooks.callback(sub.register_forward_pre_hook(enter).remove)
            hooks.callback(sub.register_forward_hook(leave, always_call=True).remove)
        with torch.no_grad(), Watch():
            module(*[a.clone() for a in args])
    return seen[0] if seen else None


def _short(type_name: str) -> str:
    # torch.export records 'package.module.Class'; the class name is what users recognise.
    return type_name.rsplit(".", 1)[-1]
