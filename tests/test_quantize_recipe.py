"""The default op types for transformer-like models (optimizer/quantization/recipe.py): what counts as attention
and a LayerNorm, and which op types choose_recipe keeps for each accuracy it measures. MiniLM end to end is in
test_quantize_minilm.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from optim.optimizer.quantization.accuracy import OutputAccuracy, SliceAccuracy
from optim.optimizer.quantization.recipe import (
    RECIPE_COSINE,
    choose_recipe,
    has_attention,
    has_layer_norm,
    is_transformer_like,
    transformer_op_types,
    worst_cosine,
)


def _model(nodes, weights=(), extra_inputs=()):
    inits = [numpy_helper.from_array(np.ones((8, 8), np.float32), name) for name in weights]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8])
                                           for n in ("x", *extra_inputs)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def attention_block(norm: str = "LayerNormalization", key_is_weight: bool = False, conv: bool = False):
    """LayerNorm -> Q, K projections -> Q x K^T -> scale -> mask -> Softmax."""
    nodes = []
    if norm == "LayerNormalization":
        nodes.append(helper.make_node("LayerNormalization", ["x", "gamma"], ["h"]))
    elif norm == "decomposed":
        nodes += [helper.make_node("ReduceMean", ["x"], ["mu"]), helper.make_node("Sub", ["x", "mu"], ["d"]),
                  helper.make_node("Mul", ["d", "d"], ["d2"]), helper.make_node("ReduceMean", ["d2"], ["var"]),
                  helper.make_node("Sqrt", ["var"], ["std"]), helper.make_node("Div", ["d", "std"], ["h"])]
    else:
        nodes.append(helper.make_node("Relu", ["x"], ["h"]))
    nodes += [helper.make_node("MatMul", ["h", "wq"], ["q"]), helper.make_node("MatMul", ["h", "wk"], ["k"]),
              helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "wk" if key_is_weight else "kt"], ["s"]),
              helper.make_node("Div", ["s", "scale"], ["s2"]), helper.make_node("Add", ["s2", "mask"], ["s3"]),
              helper.make_node("Softmax", ["s3"], ["y"], axis=-1)]
    if conv:
        nodes.append(helper.make_node("Conv", ["x", "wq"], ["unused"]))
    model = _model(nodes, weights=("wq", "wk"), extra_inputs=("mask",))
    model.graph.initializer.extend([numpy_helper.from_array(np.ones(8, np.float32), "gamma"),
                                    numpy_helper.from_array(np.float32(2.0), "scale")])
    return model


@pytest.mark.parametrize("norm", ["LayerNormalization", "decomposed"])
def test_attention_and_a_layer_norm_make_a_transformer(norm):
    model = attention_block(norm)
    onnx.checker.check_model(model)
    assert has_attention(model) and has_layer_norm(model) and is_transformer_like(model)


def test_a_softmax_after_a_weight_matmul_is_not_attention():
    # A classifier's Softmax over logits: the MatMul before it has a constant operand.
    assert not has_attention(attention_block(key_is_weight=True))
    assert not is_transformer_like(attention_block(key_is_weight=True))


def test_attention_without_a_norm_is_not_transformer_like():
    model = attention_block(norm="none")
    assert has_attention(model) and not has_layer_norm(model) and not is_transformer_like(model)


def test_the_recipe_keeps_convolutions_where_there_are_some():
    assert transformer_op_types(attention_block()) == ["MatMul"]
    assert transformer_op_types(attention_block(conv=True)) == ["MatMul", "Conv"]


def test_worst_cosine_counts_the_parts_of_an_output():
    part = SliceAccuracy("Concat 'cat' input 'scores'", 0.5, 1.0, 1.0, 2, False)
    rows = [OutputAccuracy("a", "OptimEP", 0.999, 30.0, 0.1), OutputAccuracy("b", "OptimEP", 0.998, 30.0, 0.1, slices=[part])]
    assert worst_cosine(rows) == 0.5


def _choose(every: float, only: float):
    asked = []

    def measure(op_types):
        asked.append(op_types)
        return every if op_types is None else only

    return choose_recipe(attention_block(), measure, lambda _line: None), asked


def test_every_op_type_stays_when_it_is_accurate_enough():
    # SegFormer-B0: 0.9987 with every op type, faster than MatMul + Conv only (88 integer units instead of 156).
    recipe, asked = _choose(RECIPE_COSINE + 0.005, 0.9999)
    assert recipe.op_types is None and recipe.recipe_cosine is None and asked == [None]
    assert "so every op type stays quantized" in recipe.reason


def test_the_matmul_recipe_is_taken_when_every_op_type_loses_accuracy():
    recipe, asked = _choose(0.943, 0.9989)  # ViT-B/16
    assert recipe.op_types == ["MatMul"] and asked == [None, ["MatMul"]]
    assert recipe.reason == ("attention and LayerNorm: worst cosine 0.94300 with every op type quantized, 0.99890 with "
                             "MatMul only; --op-types chooses otherwise")
    assert recipe.to_dict() == {"op_types": ["MatMul"], "every_op_cosine": 0.943, "recipe_cosine": 0.9989,
                                "reason": recipe.reason}


def test_every_op_type_stays_when_the_recipe_is_no_better():
    recipe, _ = _choose(0.95, 0.94)
    assert recipe.op_types is None and recipe.recipe_cosine == 0.94
    assert "no better with MatMul only (0.94000)" in recipe.reason
