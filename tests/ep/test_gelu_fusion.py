"""The exact GELU as exporters spell it, x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes, runs on OptimEP
as one Gelu (here folded into the MatMul before it; in each spelling seen: Div or Mul by 1/sqrt 2, the 0.5 before or after the x), with
outputs within the float tolerances of ORT's CPU EP; near misses (another constant, an intermediate
value that is also a graph output) stay as separate nodes and stay correct."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import assert_close, make_model, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node


def _gelu_model(scale_op="Div", half_first=True, add_const=1.0, extra_output=False):
    consts = {"c": np.array(np.sqrt(2.0) if scale_op == "Div" else np.sqrt(0.5), np.float32),
              "one": np.array(add_const, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [N("MatMul", ["x", "w"], ["h"]),  # something before it, as in a transformer's FFN
             N(scale_op, ["h", "c"], ["s"]), N("Erf", ["s"], ["e"]), N("Add", ["e", "one"], ["a"])]
    if half_first:
        nodes += [N("Mul", ["a", "half"], ["m"]), N("Mul", ["h", "m"], ["y"])]
    else:
        nodes += [N("Mul", ["h", "a"], ["m"]), N("Mul", ["m", "half"], ["y"])]
    consts["w"] = np.random.default_rng(1).standard_normal((16, 24)).astype(np.float32)
    return make_model(nodes, {"x": (np.float32, [3, 16])}, ["y"] + (["e"] if extra_output else []), consts)


def _steps(sess):
    return [s.split(" ")[0] for steps in placement(sess).compiled.values() for s in steps]


@pytest.mark.parametrize("scale_op", ["Div", "Mul"])
@pytest.mark.parametrize("half_first", [True, False])
def test_exact_gelu_runs_as_one_step(scale_op, half_first):
    model = _gelu_model(scale_op, half_first)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32) * 3
    sess = session(model, fallback=False)
    # one Gelu, folded into the MatMul before it (rewrites/matmul_bias.cc)
    labels = [s for steps in placement(sess).compiled.values() for s in steps]
    assert len(labels) == 1 and labels[0].startswith("MatMul") and labels[0].count("+ Gelu") == 1, labels
    assert_close(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0], what=f"{scale_op} half_first={half_first}")


@pytest.mark.parametrize("variant", ["other_constant", "intermediate_is_output"])
def test_near_misses_stay_separate_and_correct(variant):
    model = _gelu_model(add_const=2.0) if variant == "other_constant" else _gelu_model(extra_output=True)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    sess = session(model, fallback=False)
    assert "Gelu" not in _steps(sess) and "Erf" in _steps(sess)
    for got, ref in zip(sess.run(None, {"x": x}), run_cpu(model, {"x": x})):
        assert_close(got, ref, what=variant)
