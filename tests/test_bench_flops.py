"""benchmarks/flops.py: the multiply-add counts the real-size and conv benchmarks turn into GFLOP/s,
checked against hand counts on one-node models; and the benchmarks' budgeted run count."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from flops import count_macs  # noqa: E402
from timing import budgeted_runs  # noqa: E402


def one_node(op: str, x_shape, weight_shape, out_dims: int, **attrs):
    w = numpy_helper.from_array(np.zeros(weight_shape, np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_dims)
    graph = helper.make_graph([helper.make_node(op, ["x", "w"], ["y"], **attrs)], "g", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


@pytest.mark.parametrize("op, x_shape, w_shape, attrs, expected", [
    # prod(output) x (C_in / group) x kh x kw: 8x16x16 outputs, 3x3x3 each
    ("Conv", ["batch", 3, 32, 32], [8, 3, 3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1]}, 2 * 8 * 16 * 16 * 27),
    # depthwise: one input channel per output
    ("Conv", ["batch", 4, 10, 10], [4, 1, 3, 3], {"group": 4, "pads": [1, 1, 1, 1]}, 2 * 4 * 100 * 9),
    # prod(input) x (C_out / group) x kh x kw
    ("ConvTranspose", ["batch", 4, 5, 5], [4, 6, 2, 2], {"strides": [2, 2]}, 2 * 4 * 25 * 24),
    # prod(output) x K, leading dims broadcast
    ("MatMul", ["batch", 7, 16], [16, 5], {}, 2 * 7 * 5 * 16),
    ("Gemm", ["batch", 16], [5, 16], {"transB": 1}, 2 * 5 * 16),
])
def test_count_macs_matches_hand_counts_at_the_batch_given(op, x_shape, w_shape, attrs, expected):
    model = one_node(op, x_shape, w_shape, len(x_shape), **attrs)
    shape = [d if isinstance(d, int) else 2 for d in x_shape]
    count = count_macs(model, {"x": np.zeros(shape, np.float32)})
    assert count.total == expected and count.by_op == {op: expected} and not count.uncounted
    assert list(count.by_node.values()) == [expected]
    assert count.gflop == 2 * expected / 1e9


def test_count_macs_measures_the_shapes_inference_cannot_follow_and_leaves_other_ops_out():
    # NonZero's output size depends on the data: only a run knows K of the MatMul (3 non-zeros here).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Transpose", ["f"], ["ft"]), helper.make_node("MatMul", ["f", "ft"], ["y"], name="mm")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=10)
    count = count_macs(model, {"x": np.array([[1, -1, 2], [0, 3, -4]], np.float32)})
    assert count.total == 2 * 2 * 3 and count.by_op == {"MatMul": 12} and not count.uncounted


@pytest.mark.parametrize("round_s, budget, expected", [(0.1, 10.0, 30), (1.0, 10.0, 10), (5.0, 10.0, 5), (0.0, 1.0, 30)])
def test_budgeted_runs_fit_the_budget_within_the_bounds(round_s, budget, expected):
    assert budgeted_runs(round_s, budget, min_runs=5, max_runs=30) == expected
