"""InstanceNormalization (a GroupNorm with one channel per group, as Wav2Vec2's feature encoder exports it) on
OptimEP (CPU fallback disabled) vs the CPU EP on every ISA: drawn 1-D, 2-D and 3-D planes, planes large enough to
be split across threads, epsilon, scale and B as constants or inputs, a plane whose mean is large next to its
spread; refusals. ONNX's own cases run in test_conformance.py."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu, run_optim
from optim.ep_plugin import UnclaimedNodesError, session

N = helper.make_node
RNG = np.random.default_rng(6)


def _model(shape, epsilon=1e-5, constant_params=True, dtype=np.float32) -> tuple[bytes, dict]:
    c = shape[1]
    scale, bias = (np.abs(rand(RNG, c)) + 0.5).astype(dtype), rand(RNG, c).astype(dtype)
    x = rand(RNG, *shape).astype(dtype)
    params = {"scale": scale, "B": bias}
    inputs = {"x": (dtype, list(shape))}
    feeds = {"x": x}
    if not constant_params:
        inputs.update({k: (dtype, [c]) for k in params})
        feeds.update(params)
    node = N("InstanceNormalization", ["x", "scale", "B"], ["y"], name="inorm", epsilon=epsilon)
    return make_model([node], inputs, ["y"], None if not constant_params else params), feeds


@st.composite
def shapes(draw):
    spatial = [draw(st.integers(1, 9)) for _ in range(draw(st.integers(1, 3)))]
    return (draw(st.integers(1, 3)), draw(st.integers(1, 17)), *spatial)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(shapes(), st.sampled_from([1e-5, 1e-3, 0.5]))
def test_drawn_shapes_equal_the_cpu_ep_on_every_isa(shape, epsilon):
    model, feeds = _model(shape, epsilon=epsilon)
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        assert_close(run_optim(model, feeds, isa=isa)[0], ref, what=f"{isa} {shape}")


# Above 2**15 elements the planes are split across threads; (1, 64, 3200) is Wav2Vec2's first layer at 1 s.
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", [(1, 64, 3200), (2, 8, 64, 64)])
def test_large_planes_equal_the_cpu_ep(isa, shape):
    model, feeds = _model(shape)
    assert_close(run_optim(model, feeds, isa=isa)[0], run_cpu(model, feeds)[0])


def test_an_empty_plane_gives_an_empty_output():
    model, feeds = _model((2, 3, 0))
    assert run_optim(model, feeds)[0].shape == (2, 3, 0)


@pytest.mark.parametrize("constant_params", [True, False])
def test_epsilon_and_parameters_as_inputs(constant_params):
    model, feeds = _model((2, 5, 9), epsilon=0.3, constant_params=constant_params)
    assert_close(run_optim(model, feeds)[0], run_cpu(model, feeds)[0])


def test_a_large_mean_next_to_a_small_spread_keeps_its_digits():
    # The CPU EP itself is 0.03 off here (it loses digits in its variance), so the reference is float64 numpy.
    model, feeds = _model((1, 4, 1000))
    x = (1000.0 + 0.01 * feeds["x"]).astype(np.float32)
    params = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(model).graph.initializer}
    x64 = x.astype(np.float64)
    spread = x64 - x64.mean(-1, keepdims=True)
    ref = spread / np.sqrt((spread**2).mean(-1, keepdims=True) + 1e-5) * params["scale"][:, None] + params["B"][:, None]
    assert_close(run_optim(model, {"x": x})[0], ref.astype(np.float32), atol=1e-5, rtol=1e-5)


def test_float64_is_refused_with_its_dtype():
    model, _ = _model((2, 3, 4), dtype=np.float64)
    with pytest.raises(UnclaimedNodesError, match=re.escape("'x' is float64 (OptimEP's InstanceNormalization runs float32)")):
        session(model, fallback=False)
