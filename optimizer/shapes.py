"""Types and shapes of every value, inferred by ONNX's shape inference for the passes to consult."""

from __future__ import annotations

import onnx
from onnx import numpy_helper

from .graph import ValueInfos, attr, constant_node_value

# Shape inference reads initializer values only to propagate small shape tensors; large weights
# are stripped from the copy it sees, which makes inference on a 90 MB model four times faster.
_KEEP_DATA_BYTES = 4096


def infer_value_infos(model: onnx.ModelProto) -> ValueInfos:
    """ValueInfos by name for the main graph's values (inputs, outputs, intermediates, initializers).

    Inference failures (unknown ops, models shape inference cannot follow) leave the values
    unknown; passes that need a shape then refuse with a reason.
    """
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    for init in skeleton.graph.initializer:
        if init.ByteSize() > _KEEP_DATA_BYTES:
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "external_data"):
                init.ClearField(field)
            init.data_location = onnx.TensorProto.DEFAULT
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # noqa: BLE001 - any inference failure only means "shapes unknown"
        inferred = skeleton
    graph = inferred.graph
    infos: ValueInfos = {}
    for value in [*graph.value_info, *graph.input, *graph.output]:
        infos[value.name] = value
    _name_equal_dims_alike(graph, infos)
    return infos


# Ops whose inputs broadcast against each other (right-aligned), MatMul's batch dims aside.
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
                           "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "PRelu"})


def _name_equal_dims_alike(graph: onnx.GraphProto, infos: ValueInfos) -> None:
    """Gives dims that are provably equal one symbolic name. ONNX's inference makes up a fresh name
    (unk__N) for a dim it copies through Reshape's 0 next to a -1, and for a broadcast or MatMul batch dim
    whose inputs carry different names, so `batch` is lost after the first Reshape. Walking the nodes in
    order, a Reshape's copied dim (0, allowzero off) is its input's, and a broadcast dim whose inputs all
    carry names already known equal is theirs; the names are then rewritten to one per class (a name
    from the model, such as the input's `batch`, before a made-up one)."""
    parent: dict[str, str] = {}

    def find(a: str) -> str:
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    def union(a, b) -> None:
        if not isinstance(a, str) or not isinstance(b, str):
            return
        ra, rb = find(a), find(b)
        if ra != rb:
            keep, drop = (rb, ra) if ra.startswith("unk__") else (ra, rb)
            parent[drop] = keep

    def dims(name: str) -> list | None:
        info = infos.get(name)
        if info is None or not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in info.type.tensor_type.shape.dim]

    small = {t.name: t for t in graph.initializer}
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}

    def constant(name: str):
        if name in small and small[name].HasField("raw_data") or name in small and small[name].int64_data:
            return numpy_helper.to_array(small[name])
        return constant_node_value(constants[name]) if name in constants else None

    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or not node.output:
            continue
        out = dims(node.output[0])
        if out is None:
            continue
        if node.op_type == "Reshape" and len(node.input) > 1 and not attr(node, "allowzero", 0):
            target, data = constant(node.input[1]), dims(node.input[0])
            if target is not None and data is not None and target.ndim == 1 and len(target) == len(out):
                _reshape_dims_alike(target.tolist(), data, out, union, find)
        elif node.op_type in _BROADCASTING or node.op_type == "MatMul":
            ins = [dims(i) for i in node.input if i]
            if any(d is None for d in ins):
                continue
            skip = 2 if node.op_type == "MatMul" else 0  # MatMul's last two dims are not broadcast
            if skip and (len(out) < 3 or any(len(d) < 2 for d in ins)):
                continue
            for back in range(1 + skip, len(out) + 1):  # positions from the right
                at = [d[-back] for d in ins if len(d) >= back and d[-back] != 1]
                if at and isinstance(out[-back], str) and all(isinstance(a, str) for a in at) \
                        and len({find(a) for a in at}) == 1:
                    union(at[0], out[-back])
    if not parent:
        return
    for info in infos.values():
        if info.type.HasField("tensor_type"):
            for d in info.type.tensor_type.shape.dim:
                if d.dim_param and find(d.dim_param) != d.dim_param:
                    d.dim_param = find(d.dim_param)


def _reshape_dims_alike(target: list[int], data: list, out: list, union, find) -> None:
    """A Reshape's copied dims (0) are its input's; so is its -1 when the input has one named dim left
    over (not copied) and the static dims on both sides multiply to the same count."""
    copied = [i for i, t in enumerate(target) if t == 0 and i < len(data)]
    for i in copied:
        union(data[i], out[i])
    if target.count(-1) != 1 or any(d is None for d in data):
        return
    left = [find(d) for i, d in enumerate(data) if isinstance(d, str) and i not in copied]
    static_in = 1
    for i, d in enumerate(data):
        if isinstance(d, int) and i not in copied:
            static_in *= d
    static_out = 1
    for t in target:
        static_out *= t if t > 0 else 1
    if len(left) == 1 and static_in == static_out:
        union(left[0], out[target.index(-1)])
