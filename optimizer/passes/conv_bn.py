"""BatchNormalization (inference) after a Conv folded into the Conv's weights and bias.

BN(conv(x, W) + b) = conv(x, W * f) + (b - mean) * f + beta, with f = scale / sqrt(var + eps)
per output channel. Computed in float64, stored in the weights' dtype.
"""

from __future__ import annotations

import numpy as np

from ..graph import GraphView, attr
from ..rule import Match, Rule

_FLOAT_KINDS = "f"


class FoldConvBatchNorm(Rule):
    name = "fold_conv_bn"
    summary = "fold an inference BatchNormalization into the Conv before it"
    anchors = frozenset({"BatchNormalization"})

    def pattern(self, g: GraphView, node) -> Match | None:
        conv = g.producer_op(node.input[0], "Conv")
        if conv is None:
            return None
        return Match([conv, node], {"conv": conv, "bn": node})

    def check(self, g: GraphView, m: Match) -> str | None:
        conv, bn = m["conv"], m["bn"]
        if attr(bn, "training_mode", 0) or (g.opset() < 7 and not attr(bn, "is_test", 0)):
            return "BatchNormalization is in training mode"
        if any(out and (g.consumers(out) or out in g.outputs) for out in bn.output[1:]):
            return "BatchNormalization's running statistics outputs are used"
        problem = g.private_problem(conv.output[0], bn)
        if problem:
            return problem
        for role, name in zip(("scale", "bias", "mean", "variance"), bn.input[1:5]):
            if g.constant(name) is None:
                return f"BatchNormalization {role} {name!r} is not a constant"
        weight = g.constant(conv.input[1])
        if weight is None:
            return f"Conv weight {conv.input[1]!r} is not a constant"
        if weight.dtype.kind not in _FLOAT_KINDS:
            return f"Conv weight is {weight.dtype}, not a float type"
        weights = [conv.input[1]] + ([conv.input[2]] if len(conv.input) > 2 and conv.input[2] else [])
        if len(weights) == 2 and g.constant(weights[1]) is None:
            return f"Conv bias {weights[1]!r} is not a constant"
        for name in weights:
            problem = g.shared_problem(name, conv)
            if problem:  # folding would have to copy it: the model would grow
                return problem
        channels = weight.shape[0]
        for name in bn.input[1:5]:
            if g.constant(name).size != channels:
                return f"BatchNormalization parameter {name!r} has {g.constant(name).size} values for {channels} channels"
        return None

    def rewrite(self, g: GraphView, m: Match) -> str:
        conv, bn = m["conv"], m["bn"]
        weight = g.constant(conv.input[1])
        scale, beta, mean, var = (g.constant(n).astype(np.float64).reshape(-1) for n in bn.input[1:5])
        bias = (g.constant(conv.input[2]).astype(np.float64) if len(conv.input) > 2 and conv.input[2]
                else np.zeros(weight.shape[0]))
        factor = scale / np.sqrt(var + attr(bn, "epsilon", 1e-5))
        new_weight = (weight.astype(np.float64) * factor.reshape(-1, *([1] * (weight.ndim - 1)))).astype(weight.dtype)
        new_bias = ((bias - mean) * factor + beta).astype(weight.dtype)
        w_name = g.add_initializer(new_weight, f"{conv.input[1]}_bn")
        b_name = g.add_initializer(new_bias, f"{conv.input[2]}_bn" if len(conv.input) > 2 and conv.input[2] else f"{w_name}_bias")
        fused = g.make_node("Conv", [conv.input[0], w_name, b_name], [bn.output[0]], conv)
        fused.attribute.extend(conv.attribute)
        g.replace([conv, bn], [fused])
        return f"folded into Conv {fused.name} (weights {w_name!r}, bias {b_name!r})"
