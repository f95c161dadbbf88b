"""What may be pruned in a PyTorch model, read from torch-pruning's dependency graph.

torch-pruning groups every layer whose channels must shrink together (a residual add ties a block's convolutions,
a depthwise convolution its BatchNorm and both neighbours, a concatenation its parts). On top of that this module
decides what optim does not prune:
- a group that reaches a model output unconsumed (a classifier's classes, a detector's box coordinates): pruning
  it would change what the model returns;
- a transformer's residual stream (a group holding a LayerNorm or an Embedding): its width runs through every
  block, and shrinking it costs the most accuracy for the least speed; transformers lose whole attention heads
  and feed-forward width instead.
Attention is found by its projections (query/key/value, q_proj/k_proj/v_proj, q/k/v) beside a head-count
attribute; torch-pruning removes whole heads there, and `Attention.update()` rewrites the head-count attributes
that the module's forward reshapes with.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch_pruning as tp
from torch import nn

# Projection names per attention style, and the attributes that hold head counts.
_PROJECTIONS = (("query", "key", "value"), ("q_proj", "k_proj", "v_proj"), ("q", "k", "v"))
_HEAD_ATTRS = ("num_attention_heads", "num_heads", "heads", "n_head", "n_heads")
_KV_HEAD_ATTRS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads")
_WIDTH_ATTRS = ("all_head_size", "inner_dim")  # query width, kept in step with the head count
# Normalisations that mark a transformer's residual stream.
_STREAM_MARKERS = (nn.LayerNorm, nn.Embedding)


@dataclass
class Attention:
    """One attention module: its projections, head counts and the attributes that must follow a head pruning."""

    module: nn.Module
    query: nn.Linear
    kv: tuple[nn.Linear, nn.Linear]
    heads: int
    kv_heads: int
    head_dim: int  # fixed: heads go whole
    head_attrs: list[str] = field(default_factory=list)
    kv_head_attrs: list[str] = field(default_factory=list)
    width_attrs: list[str] = field(default_factory=list)

    def update(self) -> int:
        """Sets the module's head-count attributes from its projections' widths; returns the new head count."""
        heads = self.query.out_features // self.head_dim
        kv_heads = self.kv[0].out_features // self.head_dim
        for name in self.head_attrs:
            setattr(self.module, name, heads)
        for name in self.kv_head_attrs:
            setattr(self.module, name, kv_heads)
        for name in self.width_attrs:
            setattr(self.module, name, self.query.out_features)
        self.heads, self.kv_heads = heads, kv_heads
        return heads


@dataclass
class Group:
    """One set of layers that shrink together, by module name: `kind` is "channels" (convolutions, plain linear
    layers), "heads" (an attention's projections: whole heads go) or "ffn width" (a transformer's feed-forward)."""

    kind: str
    names: list[str]  # the layers whose outputs narrow (the first one is the group's root)
    width: int  # channels (or heads) before pruning


@dataclass
class Structure:
    """What prune_model may touch, by module name (so that it applies to copies of the model too): the ignored
    layers (torch-pruning never makes them narrower), the attention modules and the prunable groups."""

    ignored: list[str]
    attention: list[str]
    groups: list[Group]

    def kinds(self) -> dict[str, int]:
        """"channels" / "heads" / "ffn width" -> how many groups of that kind."""
        counts: dict[str, int] = {}
        for g in self.groups:
            counts[g.kind] = counts.get(g.kind, 0) + 1
        return counts

    def attention_in(self, model: nn.Module) -> list[Attention]:
        """The Attention records of `model` (the traced model or a copy of it)."""
        modules = dict(model.named_modules())
        return [a for a in find_attention(model) if _name_of(modules, a.module) in self.attention]

    def ignored_in(self, model: nn.Module) -> list[nn.Module]:
        modules = dict(model.named_modules())
        return [modules[n] for n in self.ignored]


def _name_of(modules: dict[str, nn.Module], module: nn.Module) -> str:
    return next(n for n, m in modules.items() if m is module)


def num_heads(attention: list[Attention]) -> dict[nn.Module, int]:
    """torch-pruning's num_heads: each projection -> its head count."""
    heads = {}
    for a in attention:
        heads[a.query] = a.heads
        for proj in a.kv:
            heads[proj] = a.kv_heads
    return heads


def find_attention(model: nn.Module) -> list[Attention]:
    """Attention modules found by their projections and a head-count attribute."""
    found = []
    for module in model.modules():
        heads = next(((n, getattr(module, n)) for n in _HEAD_ATTRS if isinstance(getattr(module, n, None), int)), None)
        if heads is None:
            continue
        for names in _PROJECTIONS:
            projs = [getattr(module, n, None) for n in names]
            if all(isinstance(p, nn.Linear) for p in projs):
                break
        else:
            continue
        query, key, value = projs
        count = heads[1]
        if count < 1 or query.out_features % count:
            continue
        head_dim = query.out_features // count
        kv_attrs = [n for n in _KV_HEAD_ATTRS if isinstance(getattr(module, n, None), int)]
        kv_heads = key.out_features // head_dim if key.out_features % head_dim == 0 else 0
        if kv_heads < 1 or value.out_features != key.out_features:
            continue
        found.append(Attention(
            module, query, (key, value), count, kv_heads, head_dim,
            head_attrs=[n for n in _HEAD_ATTRS if getattr(module, n, None) == count],
            kv_head_attrs=kv_attrs,
            width_attrs=[n for n in _WIDTH_ATTRS if getattr(module, n, None) == query.out_features]))
    return found


def dependency_graph(model: nn.Module, args: tuple, output_transform):
    """torch-pruning's dependency graph of `model` on `args` (its warnings about parameters outside modules,
    which optim never prunes, silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tp.DependencyGraph().build_dependency(model, example_inputs=args, output_transform=output_transform)


def _is_real(module) -> bool:
    return isinstance(module, nn.Module) and not type(module).__module__.startswith("torch_pruning")


def find_structure(model: nn.Module, args: tuple, output_transform) -> Structure:
    """Traces `model` on `args` and decides which groups optim may prune (see the module's docstring)."""
    names = {id(m): n for n, m in model.named_modules()}
    attention = find_attention(model)
    projections = {id(p): a for a in attention for p in (a.query, *a.kv)}
    graph = dependency_graph(model, args, output_transform)
    ignored: dict[str, None] = {}
    groups = []
    for group in graph.get_all_groups(root_module_types=(nn.Conv2d, nn.Conv1d, nn.Linear)):
        targets = [(dep.target.module, dep.handler) for dep, _ in group]
        outs = list({id(m): m for m, h in targets if _is_real(m) and graph.is_out_channel_pruning_fn(h)
                     and isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear))}.values())
        consumed = any(_is_real(m) and graph.is_in_channel_pruning_fn(h) for m, h in targets)
        stream = any(isinstance(m, _STREAM_MARKERS) for m, _ in targets)
        if not outs:
            continue
        if stream or not consumed:
            ignored.update(dict.fromkeys(names[id(m)] for m in outs))
            continue
        heads = [projections[id(m)] for m in outs if id(m) in projections]
        if heads:
            groups.append(Group("heads", [names[id(m)] for m in outs], heads[0].heads))
        else:
            kind = "ffn width" if attention and all(isinstance(m, nn.Linear) for m in outs) else "channels"
            groups.append(Group(kind, [names[id(m)] for m in outs], graph.get_out_channels(outs[0])))
    return Structure(list(ignored), [names[id(a.module)] for a in attention], groups)
