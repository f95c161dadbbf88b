"""Attention over a key / value cache, as decoders export it, runs on OptimEP as one GroupAttention step
(rewrites/group_attention.cc): grouped-query heads repeated by Unsqueeze / Expand / Reshape, or a cache read as it is
(one head each); scaled by a Mul or a Div, with or without a mask. On every kernel set the outputs stay within the
float tolerances of ORT's CPU EP; near misses stay as separate nodes and stay correct."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(7)


def _attention_model(batch, heads, kv_heads, s, past, d, *, scale_op="Mul", mask=True, axis=2, extra_output=False,
                     capacity=0):
    """present = Concat(past, new) per K and V (graph outputs, as a decoder's), then softmax(Q K^T * c + mask) V,
    K and V's heads repeated heads / kv_heads times when they differ. capacity: the caches are buffers of that many
    positions, as llm/cache_layout.py makes them: present = ScatterND(buffer, write indices, new), and the attention
    reads Slice(present, 0, total) on axis 2 (total an input)."""
    t = past + s
    group = heads // kv_heads
    inputs = {"q": (np.float32, [batch, heads, s, d]), "new_k": (np.float32, [batch, kv_heads, s, d]),
              "new_v": (np.float32, [batch, kv_heads, s, d])}
    consts = {"c": np.array(1 / np.sqrt(d) if scale_op == "Mul" else np.sqrt(d), np.float32)}
    if capacity:
        inputs.update(past_k=(np.float32, [batch, kv_heads, capacity, d]), past_v=(np.float32, [batch, kv_heads, capacity, d]),
                      rows=(np.int64, [batch, kv_heads, s, 3]), total=(np.int64, [1]))
        consts.update(zero=np.array([0], np.int64), seq_axis=np.array([2], np.int64))
        nodes = []
        for name in ("k", "v"):
            nodes += [N("ScatterND", [f"past_{name}", "rows", f"new_{name}"], [f"present_{name}"]),
                      N("Slice", [f"present_{name}", "zero", "total", "seq_axis"], [f"cache_{name}"])]
        k, v = "cache_k", "cache_v"
    else:
        inputs.update(past_k=(np.float32, [batch, kv_heads, past, d]), past_v=(np.float32, [batch, kv_heads, past, d]))
        nodes = [N("Concat", ["past_k", "new_k"], ["present_k"], axis=2),
                 N("Concat", ["past_v", "new_v"], ["present_v"], axis=2)]
        k, v = "present_k", "present_v"
    if group > 1:
        consts.update(axes=np.array([axis], np.int64), expand=np.array([batch, kv_heads, group, t, d], np.int64),
                      shape=np.array([batch, heads, t, d], np.int64))
        if axis != 2:
            consts["expand"] = np.array([batch, group, kv_heads, t, d], np.int64)
        for name, cache in (("k", k), ("v", v)):
            nodes += [N("Unsqueeze", [cache, "axes"], [f"u_{name}"]),
                      N("Expand", [f"u_{name}", "expand"], [f"e_{name}"]),
                      N("Reshape", [f"e_{name}", "shape"], [f"r_{name}"])]
        k, v = "r_k", "r_v"
    nodes += [N("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]), N("MatMul", ["q", "kt"], ["scores"]),
              N(scale_op, ["scores", "c"], ["scaled"])]
    logits = "scaled"
    if mask:
        inputs["mask"] = (np.float32, [batch, 1, s, t])
        nodes.append(N("Add", ["scaled", "mask"], ["masked"]))
        logits = "masked"
    nodes += [N("Softmax", [logits], ["p"], axis=-1), N("MatMul", ["p", v], ["y"])]
    outputs = ["y", "present_k", "present_v"] + (["scores"] if extra_output else [])
    return make_model(nodes, inputs, outputs, consts, opset=18), inputs


def _feeds(inputs, left_padding=0, hidden=np.finfo(np.float32).min, past=0):
    """Random inputs; a causal mask as exporters write it (0 where visible, `hidden` where not), the first
    `left_padding` positions of the last row hidden too; for a fixed-capacity cache (inputs "rows" and "total"), the
    write indices of positions past.. and the length."""
    feeds = {name: RNG.standard_normal(shape).astype(np.float32) for name, (dt, shape) in inputs.items()
             if dt == np.float32}
    if "rows" in inputs:
        from optim.llm.cache_layout import write_indices

        batch, kv_heads, s, _ = inputs["rows"][1]
        feeds["rows"] = write_indices(batch, kv_heads, past, s)
        feeds["total"] = np.array([past + s], np.int64)
    if "mask" in feeds:
        batch, _, s, t = inputs["mask"][1]
        visible = np.arange(t)[None, :] <= (t - s + np.arange(s))[:, None]
        mask = np.broadcast_to(np.where(visible, 0, hidden), (batch, 1, s, t)).astype(np.float32).copy()
        mask[-1, :, :, :left_padding] = hidden
        feeds["mask"] = mask
    return feeds


CASES = [  # (batch, heads, kv heads, S, past, D, scale op, mask)
    (2, 6, 2, 1, 13, 20, "Mul", True),   # grouped-query decode step, D not a multiple of the vector width
    (1, 4, 2, 5, 3, 16, "Mul", True),    # a prefill after a past: causal mask rows
    (1, 4, 4, 1, 39, 64, "Div", False),  # one head per cache head (GPT-2 style), 40 positions: 8-row groups + tail
    (2, 8, 1, 2, 30, 32, "Mul", True),   # multi-query (one cache head for all)
    (1, 2, 2, 1, 9, 48, "Mul", False),   # D = a whole 32-column block of the weighted sums, then a masked tail
]


@pytest.mark.parametrize("batch, heads, kv_heads, s, past, d, scale_op, mask", CASES)
def test_cached_attention_runs_as_one_step_on_every_isa(batch, heads, kv_heads, s, past, d, scale_op, mask):
    model, inputs = _attention_model(batch, heads, kv_heads, s, past, d, scale_op=scale_op, mask=mask)
    feeds = _feeds(inputs)
    want = run_cpu(model, feeds)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert placement(sess).rewrites.get("group_attention") == 1, placement(sess).rewrites
        for got, ref, name in zip(sess.run(None, feeds), want, ("y", "present_k", "present_v")):
            assert_close(got, ref, what=f"{name} on {isa}")


CAPACITY_CASES = CASES + [
    (1, 14, 2, 1, 299, 64, "Mul", True),  # a long decode step, Qwen2-0.5B's heads
    (2, 4, 2, 1, 400, 16, "Mul", True),   # the last row's first 260 positions padding
]


@pytest.mark.parametrize("batch, heads, kv_heads, s, past, d, scale_op, mask", CAPACITY_CASES)
@pytest.mark.parametrize("hidden", [np.finfo(np.float32).min, -np.inf])
def test_a_fixed_capacity_cache_is_read_in_its_buffer(batch, heads, kv_heads, s, past, d, scale_op, mask, hidden):
    """The caches are buffers of more positions than hold the cache (llm/cache_layout.py): ScatterND writes the new
    rows, the Slice that cuts the valid positions is taken into the step (its end the step's length), the positions
    beyond it never read; padding hidden by -inf or by the float minimum."""
    model, inputs = _attention_model(batch, heads, kv_heads, s, past, d, scale_op=scale_op, mask=mask,
                                     capacity=past + s + 7)
    feeds = _feeds(inputs, left_padding=min(past, 260), hidden=hidden, past=past)
    for name in ("past_k", "past_v"):
        feeds[name][:, :, past + s:] = np.nan  # beyond the cache: read, it would spoil every output
    want = run_cpu(model, feeds)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        p = placement(sess)
        assert p.rewrites.get("group_attention") == 1, p.rewrites
        slices = [step for steps in p.compiled.values() for step in steps if step.startswith("Slice")]
        assert not slices, f"the Slices are the attention's: {slices}"
        for got, ref, name in zip(sess.run(None, feeds), want, ("y", "present_k", "present_v")):
            assert_close(got, ref, what=f"{name} on {isa}")


@pytest.mark.parametrize("variant", ["scores_are_an_output", "heads_repeated_on_another_axis"])
def test_near_misses_stay_separate_and_correct(variant):
    if variant == "scores_are_an_output":
        model, inputs = _attention_model(1, 4, 2, 1, 7, 16, extra_output=True)
    else:  # [B, G, Hkv, T, D]: query head h reads cache head h % Hkv, not h / G
        model, inputs = _attention_model(1, 4, 2, 1, 7, 16, axis=1)
    feeds = _feeds(inputs)
    sess = session(model, fallback=False)
    assert "group_attention" not in placement(sess).rewrites
    for got, ref in zip(sess.run(None, feeds), run_cpu(model, feeds)):
        assert_close(got, ref, what=variant)
