"""Deciding the exported model's inputs from what the caller gave and what the source defines."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from .errors import ExportError
from .examples import load_example_inputs, match_examples, random_inputs, specs_from_examples
from .loading import LoadedModel
from .specs import InputSpec, check_dim_name, parse_dynamic_spec, parse_input_spec


def resolve_inputs(
    loaded: LoadedModel,
    inputs: Sequence[str | InputSpec] | None = None,
    example_inputs: str | os.PathLike | Mapping[str, np.ndarray] | None = None,
    dynamic: Sequence[str] | Mapping[str, Mapping[int, str]] | None = None,
) -> tuple[list[InputSpec], dict[str, np.ndarray]]:
    """The input specs in forward's order and example arrays that fit them.

    Shapes come from, first match wins: `inputs` (specs or NAME:DIMS[:DTYPE] strings), the
    arrays of `example_inputs` (.npz path or dict), the source's own (zoo entry, .pt2 archive).
    The source's dynamic axes apply when the caller gave none at all (no `dynamic`, no named
    dims); pass dynamic={} for a static export of a zoo model. A .pt2 archive's dynamic axes are
    fixed: the caller may name them, not add any. `dynamic` takes "NAME:AXIS[:DIM_NAME]" strings
    or {name: {axis: dim name}}. Raises ExportError naming the input that does not fit.
    """
    if isinstance(inputs, (str, InputSpec)):  # one input given where a list was meant
        inputs = [inputs]
    given = [s if isinstance(s, InputSpec) else parse_input_spec(s) for s in inputs] if inputs else None
    examples = load_example_inputs(example_inputs) if example_inputs is not None else None
    caller_dynamic = _parse_dynamic(dynamic)
    caller_gave_axes = caller_dynamic is not None or any(s.dynamic for s in given or [])

    if given is not None:
        specs = given
    elif examples is not None:
        specs = specs_from_examples(examples)
        if loaded.inputs is not None and {s.name for s in specs} == {s.name for s in loaded.inputs}:
            specs = loaded.inputs  # the arrays are checked against the source's own specs below
    elif loaded.inputs is not None:
        specs, examples = loaded.inputs, loaded.example
    else:
        raise ExportError(
            f"{loaded.source} does not say what inputs it takes: pass --input NAME:DIMS (e.g. x:1x3x224x224) "
            f"or --example-inputs inputs.npz"
        )
    _check_unique(specs)

    if caller_gave_axes:
        specs = _apply_dynamic(specs, caller_dynamic or {}, keep_own=given is not None)
    elif loaded.inputs is not None:
        source_axes = {s.name: s.dynamic for s in loaded.inputs}
        specs = [replace(s, dynamic={a: n for a, n in source_axes.get(s.name, s.dynamic).items() if a < len(s.shape)})
                 for s in specs]
    if loaded.program is not None:
        specs = _fit_program_axes(specs, loaded)

    specs = order_by_forward(specs, loaded)
    if examples is None:
        examples = random_inputs(specs, seed=0, int_ranges=loaded.int_ranges)
    specs = match_examples(specs, examples)
    return specs, {s.name: examples[s.name] for s in specs}


def _parse_dynamic(dynamic: Sequence[str] | Mapping[str, Mapping[int, str]] | None) -> dict[str, dict[int, str]] | None:
    if dynamic is None:
        return None
    if isinstance(dynamic, Mapping):
        return {str(name): {int(a): check_dim_name(str(d)) for a, d in axes.items()} for name, axes in dynamic.items()}
    if isinstance(dynamic, str):  # one "x:0" given where a list was meant
        dynamic = [dynamic]
    parsed: dict[str, dict[int, str]] = {}
    for text in dynamic:
        name, axis, dim_name = parse_dynamic_spec(text)
        parsed.setdefault(name, {})[axis] = dim_name
    return parsed


def _check_unique(specs: list[InputSpec]) -> None:
    seen = set()
    for s in specs:
        if s.name in seen:
            raise ExportError(f"input {s.name!r} is given twice")
        seen.add(s.name)


def _apply_dynamic(specs: list[InputSpec], dynamic: dict[str, dict[int, str]], keep_own: bool) -> list[InputSpec]:
    """Specs with the caller's dynamic axes; their own named dims stay when they came from the caller."""
    names = [s.name for s in specs]
    for name in dynamic:
        if name not in names:
            raise ExportError(f"--dynamic names input {name!r}, but the inputs are {', '.join(names)}")
    result = []
    for s in specs:
        axes = dict(s.dynamic) if keep_own else {}
        for axis, dim_name in dynamic.get(s.name, {}).items():
            rank = len(s.shape)
            if not -rank <= axis < rank:
                raise ExportError(f"--dynamic {s.name}:{axis}: input {s.name!r} has {rank} axes (0..{rank - 1})")
            axes[axis % rank] = dim_name
        result.append(replace(s, dynamic=axes))
    return result


def _fit_program_axes(specs: list[InputSpec], loaded: LoadedModel) -> list[InputSpec]:
    """A .pt2 decides its dynamic axes and static sizes: keep the caller's names for its axes, refuse
    other axes and other sizes."""
    program_inputs = {s.name: s for s in loaded.inputs}
    fitted = []
    for s in specs:
        program_input = program_inputs.get(s.name)
        if program_input is None:
            fitted.append(s)  # order_by_forward names the unknown input
            continue
        if len(s.shape) != len(program_input.shape):
            raise ExportError(f"input {s.name!r} has {len(s.shape)} axes but {loaded.source} takes {program_input}")
        own = program_input.dynamic
        for axis in s.dynamic:
            if axis not in own:
                raise ExportError(
                    f"input {s.name!r} axis {axis} is static in {loaded.source}: a torch.export archive keeps the "
                    f"dynamic axes it was exported with (torch.export.export(..., dynamic_shapes=...))"
                )
        for axis, (size, expected) in enumerate(zip(s.shape, program_input.shape)):
            if axis not in own and size != expected:
                raise ExportError(
                    f"input {s.name!r} has size {size} on axis {axis} but {loaded.source} takes {program_input} "
                    f"(only its named axes may change size)"
                )
        fitted.append(replace(s, dynamic={axis: s.dynamic.get(axis, name) for axis, name in own.items()}))
    return fitted


def order_by_forward(specs: list[InputSpec], loaded: LoadedModel) -> list[InputSpec]:
    """Specs in the order of forward's parameters, which is how they are passed (positionally).

    Raises ExportError for a name forward does not take, a required parameter with no input,
    and a skipped parameter with a default before a given one (it cannot be passed positionally).
    Without parameter names (forward(*args)) the given order stands.
    """
    params = loaded.parameters
    if params is None:
        return specs
    order = [name for name, _ in params]
    signature = f"forward({', '.join(order)})"
    given = {s.name: s for s in specs}
    for name in given:
        if name not in order:
            raise ExportError(f"input {name!r} is not a parameter of the model's {signature}: name the inputs after them")
    for name, required in params:
        if required and name not in given:
            raise ExportError(f"the model's {signature} needs input {name!r}, which was not given")
    last = max(order.index(n) for n in given) if given else -1
    for name in order[:last]:
        if name not in given:
            raise ExportError(f"input {name!r} of {signature} comes before other given inputs: give it too")
    return [given[name] for name in order if name in given]
