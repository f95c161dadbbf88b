"""Raising a model's default-domain opset when a rewrite needs a newer op (Gelu-20,
LayerNormalization-17), only when every op already in the model keeps its meaning.

Raising the opset re-reads every node under the newer version of its op. That is safe exactly
when each version step in between only widened the types or added an input or attribute whose
default is the old behaviour. COMPATIBLE lists those steps, checked against ONNX's schemas
(attributes, defaults, inputs) and changelog; any other step refuses the upgrade and the
rewrite says which op blocked it.
"""

from __future__ import annotations

import functools

import onnx
from onnx import defs, helper

from .graph import DEFAULT_DOMAINS, all_nodes

# (op, version): why that version reads old models the same way.
COMPATIBLE: dict[tuple[str, int], str] = {
    **{(op, 14): "types added" for op in ("Add", "Sub", "Mul", "Div", "Relu", "Identity", "CumSum")},
    ("Reshape", 14): "allowzero added, default 0 is the old behaviour",
    **{(op, 14): "layout added, default 0 is the old behaviour" for op in ("GRU", "LSTM", "RNN")},
    ("Pow", 15): "types added",
    ("Shape", 15): "start/end added, defaults take the whole shape",
    **{(op, 16): "types added" for op in ("GreaterOrEqual", "LessOrEqual", "LeakyRelu", "PRelu", "Where",
                                          "Identity", "If", "Loop", "Scan")},
    **{(op, 16): "reduction added, default none is the old behaviour" for op in ("ScatterElements", "ScatterND")},
    ("Pad", 18): "optional axes input added",
    ("Resize", 18): "antialias/axes/keep_aspect_ratio_policy added, defaults are the old behaviour",
    ("Split", 18): "num_outputs added; the split input is unchanged",
    **{(op, 18): "max/min reductions added" for op in ("ScatterElements", "ScatterND")},
    ("LpPool", 18): "ceil_mode/dilations added, defaults are the old behaviour",
    **{(op, 18): "optional types" for op in ("OptionalGetElement", "OptionalHasElement")},
    ("AveragePool", 19): "dilations added, default 1 is the old behaviour",
    **{(op, 19): "float8 types (saturate only affects them)" for op in ("Cast", "CastLike", "QuantizeLinear")},
    **{(op, 19): "types added" for op in ("Constant", "DequantizeLinear", "Equal", "Identity", "If", "Loop", "Scan",
                                          "Reshape", "Shape", "Size")},
    ("Pad", 19): "wrap mode added",
    ("Resize", 19): "half_pixel_symmetric mode added",
    **{(op, 20): "types added" for op in ("ConstantOfShape", "IsInf", "IsNaN", "ReduceMax", "ReduceMin")},
}


@functools.cache
def _versions() -> dict[str, tuple[int, ...]]:
    history: dict[str, set[int]] = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain in DEFAULT_DOMAINS:
            history.setdefault(schema.name, set()).add(schema.since_version)
    return {op: tuple(sorted(v)) for op, v in history.items()}


def default_opset(model: onnx.ModelProto) -> int:
    return next((op.version for op in model.opset_import if op.domain in DEFAULT_DOMAINS), 0)


def upgrade_problem(model: onnx.ModelProto, target: int) -> str | None:
    """Why the model's default opset cannot be raised to `target` without changing a node's
    meaning; None when it can (or already is at least `target`)."""
    current = default_opset(model)
    if current >= target:
        return None
    if current == 0:
        return "the model does not import the default ONNX domain"
    if model.functions:
        return "the model has local functions, whose opset imports would have to move too"
    versions = _versions()
    for node in all_nodes(model.graph):
        if node.domain not in DEFAULT_DOMAINS:
            continue
        for version in versions.get(node.op_type, ()):
            if current < version <= target and (node.op_type, version) not in COMPATIBLE:
                return f"{node.op_type} changed meaning in opset {version}"
    return None


def upgrade(model: onnx.ModelProto, target: int) -> None:
    """Sets the default opset to `target` (check upgrade_problem() first) and raises the IR
    version to the least that opset needs."""
    for op in model.opset_import:
        if op.domain in DEFAULT_DOMAINS:
            op.version = target
    needed = helper.find_min_ir_version_for([helper.make_opsetid("", target)], ignore_unknown=True)
    model.ir_version = max(model.ir_version, needed)


def needs_problem(model: onnx.ModelProto, op: str, version: int) -> str | None:
    """Why `op` (new in opset `version`) cannot be used in this model; None when it can."""
    problem = upgrade_problem(model, version)
    if problem:
        return f"{op} needs opset {version} and the model's opset {default_opset(model)} cannot be raised: {problem}"
    return None


def ensure(model: onnx.ModelProto, version: int) -> str:
    """Raises the opset to `version` if it is lower (check needs_problem() first); returns a note
    for the rewrite's message, empty when nothing changed."""
    current = default_opset(model)
    if current >= version:
        return ""
    upgrade(model, version)
    return f" (opset {current} -> {version})"
