"""RMSNorm as decoders export it (Pow, ReduceMean, Add epsilon, Sqrt, Reciprocal and Mul or a Div, then the
weight's Mul) runs on OptimEP as one RMSNormalization step (rewrites/rms_norm.cc), within the float tolerances of
ORT's CPU EP on the written-out nodes; near misses stay as separate nodes and stay correct."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
WIDTH = 24


def _rms_model(form="reciprocal", weight="after", exponent=2.0, extra_output=False):
    consts = {"two": np.array(exponent, np.float32), "eps": np.array(1e-6, np.float32),
              "axes": np.array([-1], np.int64),
              "w": np.random.default_rng(3).standard_normal(WIDTH).astype(np.float32)}
    nodes = [N("Pow", ["x", "two"], ["sq"]), N("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             N("Add", ["ms", "eps"], ["mse"]), N("Sqrt", ["mse"], ["root"])]
    if form == "reciprocal":
        nodes += [N("Reciprocal", ["root"], ["inv"]), N("Mul", ["x", "inv"], ["normed"])]
    else:
        nodes += [N("Div", ["x", "root"], ["normed"])]
    out = "normed"
    if weight != "none":
        nodes.append(N("Mul", ["w", "normed"] if weight == "before" else ["normed", "w"], ["y"]))
        out = "y"
    outputs = [out] + (["ms"] if extra_output else [])
    return make_model(nodes, {"x": (np.float32, [2, 5, WIDTH])}, outputs, consts, opset=18)


@pytest.mark.parametrize("form, weight", [("reciprocal", "before"), ("reciprocal", "after"), ("div", "after"),
                                          ("div", "none")])
def test_written_out_rms_norm_runs_as_one_step(form, weight):
    model = _rms_model(form, weight)
    x = np.random.default_rng(0).standard_normal((2, 5, WIDTH)).astype(np.float32) * 3
    want = run_cpu(model, {"x": x})[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        steps = [s for ss in placement(sess).compiled.values() for s in ss]
        assert placement(sess).rewrites.get("rms_norm") == 1 and len(steps) == 1, steps
        assert_close(sess.run(None, {"x": x})[0], want, what=f"{form} {weight} on {isa}")


@pytest.mark.parametrize("variant", ["cube", "mean_is_an_output"])
def test_near_misses_stay_separate_and_correct(variant):
    model = _rms_model(exponent=3.0) if variant == "cube" else _rms_model(extra_output=True)
    x = np.random.default_rng(0).standard_normal((2, 5, WIDTH)).astype(np.float32)
    sess = session(model, fallback=False)
    assert "rms_norm" not in placement(sess).rewrites
    for got, ref in zip(sess.run(None, {"x": x}), run_cpu(model, {"x": x})):
        assert_close(got, ref, what=variant)
