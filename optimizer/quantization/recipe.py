"""Which op types a transformer gets quantized by default.

Quantizing every op type onnxruntime knows suits CNNs, but in a transformer it also puts one int8 scale on the
residual stream, the softmax and the LayerNorm inputs, whose ranges carry outliers: ViT-B/16 falls to cosine 0.94
and DeiT-tiny to 0.88-0.94, MiniLM to 0.41, while quantizing the MatMuls alone keeps 0.999. Some hybrids
(SegFormer: 20 convolutions) are fine with every op type, and faster with it. So for a model with attention and
a LayerNorm, quantize() measures every op type first and takes the MatMuls (and convolutions) only when that is
what keeps the worst output above RECIPE_COSINE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import onnx

from .accuracy import OutputAccuracy, lowest

# Every output, and every part of one, at least this close to float (cosine) with every op type quantized, or the
# transformer recipe is tried.
RECIPE_COSINE = 0.99
# Ops between an attention score MatMul and its Softmax: scaling, masking, head reshapes.
_SCORE_PATH = {"Add", "Sub", "Mul", "Div", "Where", "Cast", "Reshape", "Transpose", "Unsqueeze", "Squeeze"}
_NORMS = {"LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization", "SkipLayerNormalization"}


@dataclass
class Recipe:
    """What quantize() chose for a transformer-like model and why."""

    op_types: list[str] | None  # None: every op type
    every_op_cosine: float  # worst output (or part) with every op type quantized
    recipe_cosine: float | None  # with op types `transformer_op_types` only (None: not tried, every op type was fine)
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def _constants(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}


def has_attention(model: onnx.ModelProto) -> bool:
    """A Softmax fed, through scaling / masking / reshapes only, by a MatMul of two activations (Q x K^T)."""
    graph = model.graph
    constants = _constants(graph)
    producer = {o: n for n in graph.node for o in n.output}

    def from_scores(name: str, hops: int) -> bool:
        node = producer.get(name)
        if node is None or hops < 0:
            return False
        if node.op_type == "MatMul":
            return all(i not in constants for i in node.input)
        return node.op_type in _SCORE_PATH and any(from_scores(i, hops - 1) for i in node.input if i not in constants)

    return any(n.op_type == "Softmax" and from_scores(n.input[0], 6) for n in graph.node)


def has_layer_norm(model: onnx.ModelProto) -> bool:
    """A LayerNormalization (or RMS norm) node, or one written out (ReduceMean, then Sqrt of a variance)."""
    ops = {n.op_type for n in model.graph.node}
    return bool(ops & _NORMS) or {"ReduceMean", "Sqrt"} <= ops


def is_transformer_like(model: onnx.ModelProto) -> bool:
    return has_attention(model) and has_layer_norm(model)


def transformer_op_types(model: onnx.ModelProto) -> list[str]:
    """MatMul, and Conv where the model has convolutions (a patch embedding, a conv feature encoder)."""
    ops = {n.op_type for n in model.graph.node}
    return ["MatMul"] + (["Conv"] if "Conv" in ops else [])


def worst_cosine(rows: list[OutputAccuracy]) -> float:
    """The lowest cosine over the outputs and their parts."""
    return min(lowest(rows, "cosine"))


def choose_recipe(model: onnx.ModelProto, measure: Callable[[list[str] | None], float],
                  say: Callable[[str], None]) -> Recipe:
    """For a transformer-like `model`: `measure(op_types)` quantizes with those op types (None: all) and returns
    the worst cosine on the held-out data."""
    every = measure(None)
    if every >= RECIPE_COSINE:
        return Recipe(None, every, None, f"attention and LayerNorm: worst cosine {every:.5f} with every op type "
                                         f"quantized (>= {RECIPE_COSINE}), so every op type stays quantized")
    ops = transformer_op_types(model)
    names = ", ".join(ops)
    say(f"worst cosine {every:.5f} with every op type quantized; trying {names} only")
    only = measure(ops)
    if only > every:
        return Recipe(ops, every, only, f"attention and LayerNorm: worst cosine {every:.5f} with every op type "
                                        f"quantized, {only:.5f} with {names} only; --op-types chooses otherwise")
    return Recipe(None, every, only, f"attention and LayerNorm: worst cosine {every:.5f} with every op type quantized, "
                                     f"no better with {names} only ({only:.5f}), so every op type stays quantized")
