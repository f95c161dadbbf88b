"""A mutable view of a model's main graph for rewrite passes: who produces and who reads each value,
which values are constants, inferred types and shapes, and edits that keep the node list
topologically sorted.

Passes rewrite the main graph only; values that If/Loop/Scan bodies read from the outer scope count
as uses of those values, so nothing they need is removed or renamed away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx
from onnx import AttributeProto, helper, numpy_helper

DEFAULT_DOMAINS = ("", "ai.onnx")

ValueInfos = dict[str, onnx.ValueInfoProto]


def node_label(node: onnx.NodeProto) -> str:
    """How events name a node: its name, or 'Op -> first output' when it has none."""
    return node.name or f"{node.op_type} -> {node.output[0] if node.output else '?'}"


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def outer_names(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph reads without defining them: its outer-scope uses."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(i for i in node.input if i)
        for sub in subgraphs(node):
            used |= outer_names(sub)
        defined.update(node.output)
    used.update(v.name for v in graph.output)
    return used - defined


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of the graph and of its subgraphs, recursively."""
    for node in graph.node:
        yield node
        for sub in subgraphs(node):
            yield from all_nodes(sub)


def dead_nodes(graph: onnx.GraphProto, removable: Callable[[onnx.NodeProto], bool] = lambda node: True) -> list[int]:
    """Indexes, last first, of the `removable` nodes none of whose outputs a graph output needs; reads from
    If/Loop/Scan bodies count. Deleting them in this order keeps the other indexes valid. Nodes that are not
    removable count as needed (and so does what they read)."""
    needed = {v.name for v in graph.output}
    dead = []
    # Walking backwards, a node is live when a live node (or a graph output) reads one of its outputs;
    # one sweep suffices because the node list is topologically sorted.
    for i in range(len(graph.node) - 1, -1, -1):
        node = graph.node[i]
        if not removable(node) or any(out in needed for out in node.output if out):
            needed.update(x for x in node.input if x)
            for sub in subgraphs(node):
                needed |= outer_names(sub)
        else:
            dead.append(i)
    return dead


def read_names(graph: onnx.GraphProto) -> set[str]:
    """Every value name a node of the graph or of its subgraphs reads, and the graph outputs."""
    used = {v.name for v in graph.output}
    for node in all_nodes(graph):
        used.update(node.input)
    return used


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def other_input(node: onnx.NodeProto, name: str) -> str | None:
    """The other operand of a binary node that reads `name` (`name` itself for x op x)."""
    if node.input[0] == name:
        return node.input[1]
    if len(node.input) > 1 and node.input[1] == name:
        return node.input[0]
    return None


def first(nodes: Sequence[onnx.NodeProto], op_type: str) -> onnx.NodeProto | None:
    return next((n for n in nodes if n.op_type == op_type), None)


def constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a Constant node (tensor, float(s) or int(s)); None for sparse or string forms."""
    for a in node.attribute:
        if a.name == "value" and a.type == AttributeProto.TENSOR:
            return numpy_helper.to_array(a.t)
        if a.name == "value_float":
            return np.array(a.f, dtype=np.float32)
        if a.name == "value_floats":
            return np.array(list(a.floats), dtype=np.float32)
        if a.name == "value_int":
            return np.array(a.i, dtype=np.int64)
        if a.name == "value_ints":
            return np.array(list(a.ints), dtype=np.int64)
    return None


def prune_value_info(graph: onnx.GraphProto) -> None:
    """Drops shape annotations of values no node produces any more (removed or renamed by a pass)."""
    produced = {out for node in graph.node for out in node.output}
    keep = [v for v in graph.value_info if v.name in produced]
    if len(keep) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(keep)


class GraphView:
    """The main graph of `model`, indexed. Edits go through replace()/bypass()/add_initializer(),
    which keep the indexes current; node objects stay valid across edits (protobuf keeps them).

    `value_infos` is a zero-argument callable returning inferred ValueInfos by name; it is called
    only when a pass first asks for a type or shape (inference costs time on large models).
    """

    def __init__(self, model: onnx.ModelProto, value_infos: Callable[[], ValueInfos] | None = None):
        self.model = model
        self.graph = model.graph
        self._value_infos_source = value_infos
        self._value_infos: ValueInfos | None = None
        self._constants: dict[str, np.ndarray] = {}
        self._names: set[str] = set()
        self.reindex()

    # ---- indexes ---------------------------------------------------------------------------
    def reindex(self) -> None:
        self.nodes = list(self.graph.node)
        self._position = {id(n): i for i, n in enumerate(self.nodes)}
        self._producer: dict[str, onnx.NodeProto] = {}
        self._consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in self.nodes:
            for out in node.output:
                if out:
                    self._producer[out] = node
            reads = {i for i in node.input if i}
            for sub in subgraphs(node):
                reads |= outer_names(sub)
            for name in reads:
                self._consumers.setdefault(name, []).append(node)
        self.inputs = {v.name for v in self.graph.input}
        self.outputs = {v.name for v in self.graph.output}
        self.initializers = {t.name: t for t in self.graph.initializer}
        self._constants.clear()

    def producer(self, name: str) -> onnx.NodeProto | None:
        return self._producer.get(name)

    def producer_op(self, name: str, *op_types: str) -> onnx.NodeProto | None:
        """The default-domain node of one of `op_types` producing `name`, else None."""
        node = self._producer.get(name)
        return node if node is not None and node.op_type in op_types and self.is_default_domain(node) else None

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        """Distinct nodes reading `name` (a node reading it twice appears once)."""
        return list(self._consumers.get(name, ()))

    def position(self, node: onnx.NodeProto) -> int:
        return self._position[id(node)]

    def opset(self, domain: str = "") -> int:
        for op in self.model.opset_import:
            if op.domain in ((domain,) if domain else DEFAULT_DOMAINS):
                return op.version
        return 0

    def is_default_domain(self, node: onnx.NodeProto) -> bool:
        return node.domain in DEFAULT_DOMAINS

    # ---- constants -------------------------------------------------------------------------
    def constant(self, name: str) -> np.ndarray | None:
        """The value of `name` if it cannot change at run time: an initializer that is not also a
        graph input (a caller may feed those), or a Constant node's output."""
        if not name:
            return None
        if name in self._constants:
            return self._constants[name]
        value = None
        if name in self.initializers and name not in self.inputs:
            value = numpy_helper.to_array(self.initializers[name])
        else:
            node = self._producer.get(name)
            if node is not None and node.op_type == "Constant" and self.is_default_domain(node):
                value = constant_node_value(node)
        if value is not None:
            self._constants[name] = value
        return value

    def scalar(self, name: str) -> float | None:
        """A constant holding exactly one number, as a float; None otherwise."""
        value = self.constant(name)
        if value is None or value.size != 1 or value.dtype.kind not in "fiu":
            return None
        return float(value.reshape(-1)[0])

    # ---- types and shapes ------------------------------------------------------------------
    def value_info(self, name: str) -> onnx.ValueInfoProto | None:
        for v in self.graph.input:
            if v.name == name:
                return v
        for v in self.graph.output:
            if v.name == name:
                return v
        if self._value_infos is None:
            self._value_infos = self._value_infos_source() if self._value_infos_source else {}
        return self._value_infos.get(name)

    def dtype(self, name: str) -> int | None:
        """The element type (TensorProto enum) of a tensor value, or None when unknown."""
        if name in self.initializers:
            return self.initializers[name].data_type
        const = self.constant(name)
        if const is not None:
            return helper.np_dtype_to_tensor_dtype(const.dtype)
        info = self.value_info(name)
        if info is None or not info.type.HasField("tensor_type"):
            return None
        return info.type.tensor_type.elem_type or None

    def shape(self, name: str) -> list[int | str | None] | None:
        """Dims (int, dim name, or None when unknown) of a tensor value; None when even the rank is unknown."""
        if name in self.initializers:
            return list(self.initializers[name].dims)
        const = self.constant(name)
        if const is not None:
            return list(const.shape)
        info = self.value_info(name)
        if info is None or not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in info.type.tensor_type.shape.dim]

    def rank(self, name: str) -> int | None:
        dims = self.shape(name)
        return None if dims is None else len(dims)

    # ---- checks shared by rules -------------------------------------------------------------
    def private_problem(self, name: str, reader: onnx.NodeProto) -> str | None:
        """Why the value `name`, in the middle of a pattern, cannot disappear: it is a graph output
        or something besides `reader` reads it. None when only `reader` uses it."""
        if name in self.outputs:
            return f"{name!r} is a graph output"
        others = [n for n in self.consumers(name) if n is not reader]
        if others:
            return f"{name!r} is also read by {node_label(others[0])}" + (f" and {len(others) - 1} more" if len(others) > 1 else "")
        return None

    def shared_problem(self, name: str, reader: onnx.NodeProto) -> str | None:
        """Why the initializer `name` cannot be rewritten for `reader` alone: other nodes read it."""
        others = [n for n in self.consumers(name) if n is not reader]
        if others:
            return f"initializer {name!r} is shared with {node_label(others[0])}" + (
                f" and {len(others) - 1} more" if len(others) > 1 else "")
        return None

    def bypass_problem(self, source: str, target: str) -> str | None:
        """Why every use of `target` cannot be pointed at `source` (None when it can)."""
        if target in self.outputs:
            if source in self.outputs:
                return f"both {source!r} and {target!r} are graph outputs"
            if source in self.inputs:
                return f"it joins graph input {source!r} to graph output {target!r}, which must keep both names"
            if source not in self._producer:
                return f"graph output {target!r} would become the initializer {source!r}"
        return None

    # ---- edits -----------------------------------------------------------------------------
    def fresh_name(self, hint: str) -> str:
        """A value or node name not used anywhere in the model yet."""
        if not self._names:
            self._names = {v.name for v in self.graph.input} | set(self.initializers)
            for node in all_nodes(self.graph):
                self._names.update(node.output)
                self._names.add(node.name)
        name, k = hint, 1
        while name in self._names:
            name, k = f"{hint}_{k}", k + 1
        self._names.add(name)
        return name

    def add_initializer(self, value: np.ndarray, hint: str) -> str:
        name = self.fresh_name(hint)
        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        self.initializers[name] = self.graph.initializer[-1]
        return name

    def make_node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], replaces: onnx.NodeProto,
                  **attrs) -> onnx.NodeProto:
        """A node taking the place of `replaces` (which the rewrite removes): it keeps that node's
        name, so reports and profiles still point at the same place."""
        name = replaces.name or self.fresh_name(op_type.lower())
        return helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs)

    def replace(self, remove: Sequence[onnx.NodeProto], add: Sequence[onnx.NodeProto] = ()) -> None:
        """Removes the nodes `remove` and puts `add` (in order) where the last of them stood.

        The new nodes' inputs must be produced before that point; a pattern's inputs are, since
        they feed nodes of the pattern, so the graph stays topologically sorted.
        """
        indexes = sorted({self.position(n) for n in remove})
        at = indexes[-1] - (len(indexes) - 1)
        for i in reversed(indexes):
            del self.graph.node[i]
        for k, node in enumerate(add):
            self.graph.node.insert(at + k, node)
        self.reindex()

    def bypass(self, source: str, target: str) -> None:
        """Makes every reader of `target` read `source` instead (call after target's producer is
        gone). When target is a graph output, source's producer writes it under target's name, so
        the output keeps its name; check bypass_problem() first."""
        if target in self.outputs:
            self._rename(source, target)
            self.reindex()
        else:
            self.redirect({target: source})

    def redirect(self, renames: Mapping[str, str]) -> None:
        """Makes every reader of each key (none of them a graph output) read its value instead, the
        bodies of If/Loop/Scan included: many bypasses in one walk of the model."""
        self._rename_uses(self.graph, renames)
        self.reindex()

    def _rename(self, old: str, new: str) -> None:
        producer = self._producer[old]
        for i, out in enumerate(producer.output):
            if out == old:
                producer.output[i] = new
        self._rename_uses(self.graph, {old: new})

    def _rename_uses(self, graph: onnx.GraphProto, renames: Mapping[str, str]) -> None:
        # Value names are unique across a model and its subgraphs (no shadowing), so a
        # recursive rename cannot capture a different value.
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name in renames:
                    node.input[i] = renames[name]
            for sub in subgraphs(node):
                self._rename_uses(sub, renames)
                for out in sub.output:  # a body may return an outer value as is
                    if out.name in renames:
                        out.name = renames[out.name]
