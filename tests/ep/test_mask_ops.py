"""The non-float ops transformers build their inputs with (embedding Gather, attention-mask Cast,
comparisons, And/Or/Not, Where, Expand, Concat) and int64/bool data movement, each against ORT's CPU EP with
OptimEP's CPU fallback disabled (exact: these ops copy, pick or compare); plus the partitioner's rule
that a value deciding a claimed node's output shape is computed outside the partition."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers import make_model, run_cpu, run_optim
from optim.ep_plugin import UnclaimedNodesError, placement, session

N = helper.make_node
rng = np.random.default_rng(0)


def _same(model, feeds):
    got, ref = run_optim(model, feeds), run_cpu(model, feeds)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx_type", [np.int64, np.int32])
def test_gather_picks_rows_with_negative_indices(axis, idx_type):
    table = rng.standard_normal((6, 5)).astype(np.float32)
    idx = np.array([[0, -1, 2], [4, 1, -5]], idx_type)
    model = make_model([N("Gather", ["t", "i"], ["y"], axis=axis)], {"i": (idx_type, [2, 3])}, ["y"], {"t": table})
    _same(model, {"i": idx})


def test_gather_index_out_of_range_is_an_error_naming_the_node():
    table = rng.standard_normal((4, 3)).astype(np.float32)
    model = make_model([N("Gather", ["t", "i"], ["y"], name="embed")], {"i": (np.int64, [2])}, ["y"], {"t": table})
    with pytest.raises(Exception, match=r"(?s)embed.*index 7 is out of range"):
        run_optim(model, {"i": np.array([1, 7], np.int64)})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_expand_broadcasts_any_type(dtype):
    x = (rng.standard_normal((3, 1)) > 0).astype(dtype) if dtype is np.bool_ else rng.integers(-9, 9, (3, 1)).astype(dtype)
    model = make_model([N("Expand", ["x", "s"], ["y"])], {"x": (dtype, [3, 1])}, ["y"], {"s": np.array([2, 1, 4], np.int64)})
    _same(model, {"x": x})


@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_comparisons_broadcast(op, dtype):
    a = rng.integers(-3, 3, (2, 1, 4)).astype(dtype)
    b = rng.integers(-3, 3, (3, 1)).astype(dtype)
    model = make_model([N(op, ["a", "b"], ["y"])], {"a": (dtype, [2, 1, 4]), "b": (dtype, [3, 1])}, ["y"])
    _same(model, {"a": a, "b": b})


def test_logic_and_where_build_a_mask():
    a = rng.standard_normal((2, 1, 5)) > 0
    b = rng.standard_normal((4, 1)) > 0
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    nodes = [N("And", ["a", "b"], ["ab"]), N("Or", ["a", "b"], ["o"]), N("Xor", ["ab", "o"], ["xo"]), N("Not", ["xo"], ["n"]),
             N("Where", ["n", "x", "neg"], ["y"])]
    model = make_model(nodes, {"a": (np.bool_, [2, 1, 5]), "b": (np.bool_, [4, 1]), "x": (np.float32, [2, 4, 5])}, ["y", "n"],
                       {"neg": np.array(-1e9, np.float32)})
    _same(model, {"a": a, "b": b, "x": x})


@pytest.mark.parametrize("to", [TensorProto.INT64, TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL,
                                TensorProto.FLOAT, TensorProto.DOUBLE])
def test_cast_from_float_matches_ort_on_values_every_target_holds(to):
    x = np.array([0.0, -0.0, 2.7, -2.7, 100.5, -100.5, 1e-30, 127.9, -128.9], np.float32)
    model = make_model([N("Cast", ["x"], ["y"], to=to)], {"x": (np.float32, [x.size])}, ["y"])
    _same(model, {"x": x})


@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT32, TensorProto.UINT8])
def test_cast_from_int64_wraps_like_ort(to):
    x = np.array([0, 1, -1, 255, 256, -129, 2**31 + 5, -(2**40)], np.int64)
    model = make_model([N("Cast", ["x"], ["y"], to=to)], {"x": (np.int64, [x.size])}, ["y"])
    _same(model, {"x": x})


def test_cast_of_nan_and_huge_floats_to_int_is_defined():
    """ONNX leaves it undefined; OptimEP gives x86's 'integer indefinite' (the minimum) for int64."""
    x = np.array([np.nan, np.inf, -np.inf, 1e30], np.float32)
    model = make_model([N("Cast", ["x"], ["y"], to=TensorProto.INT64)], {"x": (np.float32, [4])}, ["y"])
    np.testing.assert_array_equal(run_optim(model, {"x": x})[0], np.full(4, np.iinfo(np.int64).min))


def test_attention_mask_pipeline_runs_on_optimep():
    """int64 mask -> Unsqueeze -> Cast -> (1 - m) * -1e4 -> added to scores, as BERT exports do."""
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int64)
    scores = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    nodes = [N("Unsqueeze", ["m", "axes"], ["mu"]), N("Cast", ["mu"], ["mf"], to=TensorProto.FLOAT),
             N("Sub", ["one", "mf"], ["inv"]), N("Mul", ["inv", "big"], ["bias"]), N("Add", ["s", "bias"], ["y"])]
    model = make_model(nodes, {"m": (np.int64, [2, 5]), "s": (np.float32, [2, 3, 5, 5])}, ["y"],
                       {"axes": np.array([1, 2], np.int64), "one": np.array(1.0, np.float32), "big": np.array(-1e4, np.float32)})
    _same(model, {"m": mask, "s": scores})


def _shape_computed_in_graph():
    # shape = Cast(float input) -> int64, read by Reshape as its target shape: OptimEP could run the Cast,
    # but its plan must know the shape before it runs, so the Cast goes to the CPU EP.
    nodes = [N("Cast", ["sf"], ["shape"], to=TensorProto.INT64, name="to_shape"), N("Reshape", ["x", "shape"], ["r"]),
             N("Relu", ["r"], ["y"])]
    return make_model(nodes, {"x": (np.float32, [2, 6]), "sf": (np.float32, [2])}, ["y"])


def test_a_value_that_decides_a_shape_is_computed_outside_the_partition():
    model = _shape_computed_in_graph()
    sess = session(model)
    cast = [n for n in placement(sess).fallback if n.node == "to_shape"]
    assert cast and "decides the shape of Reshape" in cast[0].reason
    x = rng.standard_normal((2, 6)).astype(np.float32)
    feeds = {"x": x, "sf": np.array([3, 4], np.float32)}
    np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])
    with pytest.raises(UnclaimedNodesError, match="decides the shape"):
        session(model, fallback=False)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_joins_any_type_along_any_axis(dtype, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    shapes[1][axis] = 1
    shapes[2][axis] = 5
    xs = {f"x{i}": rng.integers(0, 100, s).astype(dtype) for i, s in enumerate(shapes)}
    model = make_model([N("Concat", list(xs), ["y"], axis=axis)], {k: (dtype, list(v.shape)) for k, v in xs.items()}, ["y"])
    _same(model, xs)
