"""Rotary position embedding as decoders export it (x * cos + Concat(-x[..., h:], x[..., :h]) * sin) runs on OptimEP
as one Rotary step (rewrites/rotary.cc), within the float tolerances of ORT's CPU EP on the written-out nodes, with
cos / sin broadcast over the heads or not; near misses stay as separate nodes and stay correct."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
BATCH, HEADS, SEQ, DIM = 2, 3, 5, 16


def _rotary_model(split=DIM // 2, swap=False, cos_heads=1, end=2**62, extra_output=False):
    """transformers' apply_rotary_pos_emb for one tensor; swap: every Mul / Add operand order reversed; split: where
    the halves are cut (DIM // 2 is rotate_half); end: the upper half's Slice end (a huge value, as exporters
    write it, or DIM)."""
    consts = {"zero": np.array([0], np.int64), "half": np.array([split], np.int64), "end": np.array([end], np.int64),
              "last": np.array([-1], np.int64), "one": np.array([1], np.int64)}
    nodes = [N("Slice", ["x", "half", "end", "last", "one"], ["upper"]),
             N("Neg", ["upper"], ["neg"]),
             N("Slice", ["x", "zero", "half", "last", "one"], ["lower"]),
             N("Concat", ["neg", "lower"], ["rotated"], axis=-1)]
    pair = (lambda a, b: [b, a]) if swap else (lambda a, b: [a, b])
    nodes += [N("Mul", pair("x", "cos"), ["xc"]), N("Mul", pair("rotated", "sin"), ["rs"]),
              N("Add", pair("xc", "rs"), ["y"])]
    inputs = {"x": (np.float32, [BATCH, HEADS, SEQ, DIM]), "cos": (np.float32, [BATCH, cos_heads, SEQ, DIM]),
              "sin": (np.float32, [BATCH, cos_heads, SEQ, DIM])}
    return make_model(nodes, inputs, ["y"] + (["neg"] if extra_output else []), consts, opset=18), inputs


def _feeds(inputs):
    rng = np.random.default_rng(5)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, (_, shape) in inputs.items()}
    angles = rng.uniform(0, 6.3, inputs["cos"][1]).astype(np.float32)
    feeds["cos"], feeds["sin"] = np.cos(angles), np.sin(angles)
    return feeds


@pytest.mark.parametrize("swap, cos_heads, end", [(False, 1, 2**62), (True, 1, DIM), (False, HEADS, 2**62)])
def test_written_out_rotary_runs_as_one_step_on_every_isa(swap, cos_heads, end):
    model, inputs = _rotary_model(swap=swap, cos_heads=cos_heads, end=end)
    feeds = _feeds(inputs)
    want = run_cpu(model, feeds)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        p = placement(sess)
        assert p.rewrites.get("rotary") == 1, p.rewrites
        steps = [s for steps in p.compiled.values() for s in steps]
        assert len(steps) == 1 and steps[0].startswith("Rotary"), steps
        assert_close(sess.run(None, feeds)[0], want[0], what=f"rotary on {isa}")


@pytest.mark.parametrize("variant", ["quarter_split", "rotated_half_is_an_output"])
def test_near_misses_stay_separate_and_correct(variant):
    if variant == "quarter_split":
        model, inputs = _rotary_model(split=DIM // 4)
    else:
        model, inputs = _rotary_model(extra_output=True)
    feeds = _feeds(inputs)
    sess = session(model, fallback=False)
    assert "rotary" not in placement(sess).rewrites
    for got, ref in zip(sess.run(None, feeds), run_cpu(model, feeds)):
        assert_close(got, ref, what=variant)
