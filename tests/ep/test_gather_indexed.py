"""GatherElements and GatherND (ops/gather_indexed.cc) on OptimEP, CPU fallback disabled, against ORT's CPU EP on
every ISA: drawn shapes, axes, batch_dims, negative indices (int32 ones too for GatherElements), float and integer data, equal bit for
bit; an index out of range is a run-time error that names the node, not a crash."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers import ISAS, make_model, run_cpu, run_optim
from optim.ep_plugin import session

N = helper.make_node
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _data(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10).astype(dtype)


def _check(model, feeds):
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        got = run_optim(model, feeds, isa=isa)[0]
        assert got.dtype == ref.dtype and got.shape == ref.shape, (isa, got.shape, ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=isa)


@SETTINGS
@given(rank=st.integers(1, 4), seed=st.integers(0, 2**16), idx_type=st.sampled_from([np.int64, np.int32]),
       data_type=st.sampled_from([np.float32, np.int64, np.uint8]))
def test_gather_elements_matches_the_cpu_ep(rank, seed, idx_type, data_type):
    rng = np.random.default_rng(seed)
    shape = [int(v) for v in rng.integers(1, 6, rank)]
    axis = int(rng.integers(-rank, rank))
    idx_shape = [int(rng.integers(1, s + 1)) for s in shape]  # no larger than data off the axis
    idx_shape[axis] = int(rng.integers(1, 7))
    idx = rng.integers(-shape[axis], shape[axis], idx_shape).astype(idx_type)
    model = make_model([N("GatherElements", ["x", "i"], ["y"], axis=axis)],
                       {"x": (data_type, shape), "i": (idx_type, idx_shape)}, ["y"])
    _check(model, {"x": _data(rng, shape, data_type), "i": idx})


@SETTINGS
@given(rank=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_gather_nd_matches_the_cpu_ep(rank, seed):
    rng = np.random.default_rng(seed)
    shape = [int(v) for v in rng.integers(1, 6, rank)]
    batch_dims = int(rng.integers(0, rank))
    k = int(rng.integers(1, rank - batch_dims + 1))
    tuples = [int(v) for v in rng.integers(1, 4, int(rng.integers(1, 3)))]  # a 0-d output would need no tuple dims
    idx = np.stack([rng.integers(-shape[batch_dims + j], shape[batch_dims + j], shape[:batch_dims] + tuples)
                    for j in range(k)], axis=-1).astype(np.int64)  # GatherND's indices are int64 only
    model = make_model([N("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
                       {"x": (np.float32, shape), "i": (np.int64, list(idx.shape))}, ["y"])
    _check(model, {"x": _data(rng, shape, np.float32), "i": idx})


@pytest.mark.parametrize("op", ["GatherElements", "GatherND"])
def test_an_index_out_of_range_is_an_error_naming_the_node(op):
    idx = np.array([[0], [7]], np.int64)
    model = make_model([N(op, ["x", "i"], ["y"], name="picker")], {"x": (np.float32, [3, 2]), "i": (np.int64, [2, 1])}, ["y"])
    sess = session(model, fallback=False)
    with pytest.raises(Exception, match=r"(?s)picker.*index 7 is out of range"):
        sess.run(None, {"x": np.zeros((3, 2), np.float32), "i": idx})
