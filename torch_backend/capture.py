"""A graph Dynamo captured (FX GraphModule + example inputs) -> ONNX, with the model's weights inside.

Dynamo hands a backend every parameter and buffer as a graph input (inline_inbuilt_nn_modules). Those
inputs become ONNX initializers here, so that the optimizer can fold them (Conv+BatchNorm) and the
quantizer can quantize weights; only the user's tensors remain ONNX inputs. Size inputs (SymInt
placeholders of a dynamic graph) are recomputed from the tensors they measure, and the dims Dynamo made
symbolic are exported dynamic, so one ONNX model serves every size in that shape class.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import onnx
import torch

from optim.common.errors import UserError

OPSET = 18


class CaptureRefused(UserError):
    """The graph cannot (or must not) run on OptimEP; the backend runs it eagerly and says why."""


@dataclass(frozen=True)
class Slot:
    """One placeholder of the captured graph: a user tensor (index into the ONNX inputs), a constant
    (parameter or buffer, baked in as an initializer), a size (dim `dim` of user tensor `index`) or a scalar (a
    module's float attribute such as a LayerNorm's eps, which dynamic=True passes as a 0-d tensor read with
    .item(): baked in as a number, since torch.export cannot trace a value read out of a tensor)."""

    kind: str  # "tensor" | "constant" | "size" | "scalar"
    index: int
    dim: int = -1


@dataclass
class Plan:
    """How a graph's arguments split, read from Dynamo's placeholder metadata when the backend is called
    (Dynamo drops that metadata after compiling): a Slot per argument, the ONNX input name, dynamic axes and
    source argument (the captured function's own argument name, None for a value computed earlier) of each
    user tensor (a name, a position in `*args`; see _argument). `refused` says why the graph cannot be captured at
    all (None when it can)."""

    slots: list[Slot] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    dynamic_axes: list[list[int]] = field(default_factory=list)
    arguments: list[str | int | None] = field(default_factory=list)
    refused: str | None = None

    @property
    def tensor_positions(self) -> list[int]:
        return [p for i in range(len(self.names)) for p, s in enumerate(self.slots) if s.kind == "tensor" and s.index == i]

    @property
    def constant_positions(self) -> list[int]:
        return [p for p, s in enumerate(self.slots) if s.kind == "constant"]

    @property
    def scalar_positions(self) -> list[int]:
        return [p for p, s in enumerate(self.slots) if s.kind == "scalar"]

    @property
    def dynamic(self) -> dict[str, list[int]]:
        return {n: ax for n, ax in zip(self.names, self.dynamic_axes) if ax}


@dataclass
class Captured:
    """The ONNX model of one graph and the Plan mapping the graph's arguments onto it."""

    model: onnx.ModelProto
    plan: Plan


def _is_weight(source, value) -> bool:
    """Whether a placeholder is one of the model's parameters or buffers (Dynamo's source says so)."""
    if isinstance(value, torch.nn.Parameter):
        return True
    while source is not None:
        if "ParamBuffer" in type(source).__name__ or "NNModuleSource" in type(source).__name__:
            return True
        source = getattr(source, "base", None)
    return False


def _read_as_number(node, value: torch.Tensor) -> bool:
    """Whether a 0-d placeholder is only ever read with .item() (a float attribute wrapped by Dynamo)."""
    return value.dim() == 0 and bool(node.users) and all(
        u.op == "call_method" and u.target == "item" for u in node.users)


def _input_name(node, source, taken: set[str]) -> str:
    """The ONNX input's name: the argument's own (`x`, a `**kwargs` key), `input_<i>` for `*args[i]`, else Dynamo's."""
    argument = _argument(source)
    name = f"input_{argument}" if isinstance(argument, int) else argument or node.name
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _argument(source) -> str | int | None:
    """Which argument of the captured function a tensor is: its name, its position in `*args` (Dynamo captures a
    builtin container such as nn.Sequential through a wrapper `inner(*args, **kwargs)`), its key in `**kwargs`;
    None for a value computed earlier."""
    def is_input(s) -> bool:
        return type(s).__name__ == "LocalSource" and getattr(s, "is_input", False)

    if is_input(source):
        return source.local_name
    base = getattr(source, "base", None)
    if type(source).__name__ in ("GetItemSource", "DictGetItemSource") and is_input(base):
        index = getattr(source, "index", None)
        if base.local_name == "args" and isinstance(index, int):
            return index
        if base.local_name == "kwargs" and isinstance(index, str):
            return index
    return None


def _symbolic(dim) -> bool:
    """Whether a placeholder's dim is dynamic: a SymInt that Dynamo's shape environment has not resolved to a
    number (with dynamic=True a Conv's channel dim starts symbolic and is pinned by the weight it meets)."""
    if isinstance(dim, int):
        return False
    node = getattr(dim, "node", None)
    return node is None or node.maybe_as_int() is None


def plan_slots(gm: torch.fx.GraphModule, example_inputs: list) -> Plan:
    """The Plan of `gm`'s arguments; call it while Dynamo still holds the placeholders' metadata (in the
    backend call). A graph it cannot map gets a Plan with `refused` set."""
    try:
        return _plan(gm, example_inputs)
    except CaptureRefused as e:
        return Plan(refused=str(e))


def _plan(gm: torch.fx.GraphModule, example_inputs: list) -> Plan:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise CaptureRefused(f"the graph has {len(placeholders)} inputs but Dynamo gave {len(example_inputs)} examples")
    plan = Plan()
    taken: set[str] = set()
    by_source, sizes, constants = {}, [], 0
    for node, value in zip(placeholders, example_inputs):
        source = getattr(node.meta.get("grapharg"), "source", None)
        if isinstance(value, torch.Tensor):
            if value.device.type != "cpu":
                raise CaptureRefused(f"input {node.name} is on {value.device}; OptimEP runs on the CPU")
            if _is_weight(source, value) and _read_as_number(node, value):
                plan.slots.append(Slot("scalar", -1))
                continue
            if _is_weight(source, value):
                plan.slots.append(Slot("constant", constants))
                constants += 1
                continue
            by_source[source] = len(plan.names)
            plan.slots.append(Slot("tensor", len(plan.names)))
            plan.names.append(_input_name(node, source, taken))
            fake = node.meta.get("example_value", value)
            plan.dynamic_axes.append([a for a, d in enumerate(getattr(fake, "shape", ())) if _symbolic(d)])
            plan.arguments.append(_argument(source))
        elif isinstance(value, (int, torch.SymInt)):
            plan.slots.append(None)  # resolved below: the tensor it measures may come later
            sizes.append((len(plan.slots) - 1, node, source))
        else:
            raise CaptureRefused(f"graph input {node.name} is a {type(value).__name__}, not a tensor or a size")
    for position, node, source in sizes:
        base, prop, idx = getattr(source, "base", None), getattr(source, "prop", None), getattr(source, "idx", None)
        if base not in by_source or getattr(prop, "name", "") != "SIZE" or idx is None:
            raise CaptureRefused(f"graph input {node.name} is a number that is not a tensor's size (a value read with "
                                 ".item()?)")
        plan.slots[position] = Slot("size", by_source[base], idx)
    if not plan.names:
        raise CaptureRefused("the graph takes no input tensor (nothing to run on OptimEP)")
    if not all(isinstance(v, torch.Tensor) for v in _output_values(gm)):
        raise CaptureRefused("the graph returns values that are not tensors (sizes or Python numbers)")
    return plan


class _GraphWithWeights(torch.nn.Module):
    """`forward(*user_tensors)` calling the captured graph with the weights as this module's buffers
    (which the exporter writes as initializers) and sizes read off the tensors."""

    def __init__(self, gm: torch.fx.GraphModule, slots: list[Slot], constants: list[torch.Tensor],
                 scalars: list[float]):
        super().__init__()
        self.graph_module = _with_numbers(gm, slots, scalars)
        self.slots = [s for s in slots if s.kind != "scalar"]
        for i, c in enumerate(constants):
            self.register_buffer(f"weight_{i}", c.detach())  # detach shares the storage: no copy

    def forward(self, *tensors):
        args = []
        for slot in self.slots:
            if slot.kind == "tensor":
                args.append(tensors[slot.index])
            elif slot.kind == "constant":
                args.append(getattr(self, f"weight_{slot.index}"))
            else:
                args.append(tensors[slot.index].shape[slot.dim])
        return tuple(self.graph_module(*args))


def _with_numbers(gm: torch.fx.GraphModule, slots: list[Slot], scalars: list[float]) -> torch.fx.GraphModule:
    """A copy of `gm` (the original stays as Dynamo gave it, for an eager fallback) whose scalar placeholders are
    gone, each .item() of one replaced by its value."""
    if not scalars:
        return gm
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    values = iter(scalars)
    for slot, node in zip(slots, placeholders):
        if slot.kind == "scalar":
            value = next(values)
            for item in list(node.users):
                item.replace_all_uses_with(value)
                graph.erase_node(item)
            graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph)


_RANDOM = ("bernoulli", "rand", "normal", "multinomial")


def _base(value):
    """The tensor a view (or an in-place op's result) refers to: followed back through ops whose first
    argument's alias annotation says the output shares its memory."""
    while isinstance(value, torch.fx.Node) and value.op == "call_function" and value.args:
        schema = getattr(value.target, "_schema", None)
        if schema is None or not schema.arguments or schema.arguments[0].alias_info is None:
            break
        value = value.args[0]
    return value


def _refuse_training(program) -> None:
    """Refuses graphs whose eager run changes state or draws random numbers: an in-place update of a graph
    input, parameter or buffer (BatchNorm counting batches), an op told it is training (BatchNorm updating
    its running statistics, Dropout) or a random op, i.e. a module in training mode. OptimEP would silently
    do none of them. In-place ops on values computed inside the graph (`x += residual`) are fine."""
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        name = str(node.target)
        schema = getattr(node.target, "_schema", None)
        named = dict(zip([a.name for a in schema.arguments], node.args)) if schema is not None else {}
        named.update(node.kwargs)
        if named.get("training", named.get("train")) is True:
            raise CaptureRefused(f"the graph runs {name} in training mode; call model.eval() to run it on OptimEP")
        written = [named.get(a.name) for a in (schema.arguments if schema is not None else [])
                   if a.alias_info is not None and a.alias_info.is_write]
        if any(isinstance(_base(w), torch.fx.Node) and _base(w).op == "placeholder" for w in written):
            raise CaptureRefused(f"the graph updates an input, weight or buffer in place ({name}, e.g. a BatchNorm in "
                                 "training mode counting batches); OptimEP would not update it (model.eval() if it is training)")
        if any(r in name for r in _RANDOM):
            raise CaptureRefused(f"the graph draws random numbers ({name}); OptimEP runs deterministic inference")


def capture(gm: torch.fx.GraphModule, plan: Plan, args: list) -> Captured:
    """ONNX for `gm` called with `args` (real values: the first call's), its weights as initializers and
    Dynamo's symbolic dims dynamic, or CaptureRefused saying why the graph stays eager (another error: the
    exporter failed)."""
    from optim.exporter.quiet import quiet

    if plan.refused:
        raise CaptureRefused(plan.refused)
    wrapper = _GraphWithWeights(gm, plan.slots, [args[p] for p in plan.constant_positions],
                                [args[p].item() for p in plan.scalar_positions]).eval()
    # forward(*tensors) takes one tuple argument as torch.export sees it: its dims nest one level down.
    dynamic_shapes = (tuple({a: torch.export.Dim.DYNAMIC for a in ax} or None for ax in plan.dynamic_axes),)
    tensors = tuple(args[p].detach() for p in plan.tensor_positions)
    outputs = len(_output_values(gm))
    with quiet(verbose=False), torch.no_grad():
        program = torch.export.export(wrapper, tensors, dynamic_shapes=dynamic_shapes if plan.dynamic else None)
        _refuse_training(program)
        onnx_program = torch.onnx.export(program, tensors, dynamo=True, input_names=plan.names, opset_version=OPSET,
                                         output_names=[f"output_{i}" for i in range(outputs)])
    return Captured(model=onnx_program.model_proto, plan=plan)


def _output_values(gm: torch.fx.GraphModule) -> list:
    output = next(n for n in gm.graph.nodes if n.op == "output")
    returned = output.args[0]
    values = returned if isinstance(returned, (tuple, list)) else [returned]
    return [getattr(v, "meta", {}).get("example_value") for v in values]
