"""fold_pad_conv: a constant zero Pad of the spatial dims folded into the Conv after it."""

from __future__ import annotations

import numpy as np

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(3)
X = {"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)}
W = {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)}


def _pad_conv(pads: list[int], mode: str = "constant", value: str = "", conv_pads: str = "") -> str:
    amounts = ", ".join(str(p) for p in pads)
    value_arg = f", {value}" if value else ""
    return f"""g (float[2, 3, 6, 6] x) => (float[2, 4, ?, ?] y) {{
        amounts = Constant <value = int64[8] {{{amounts}}}> ()
        p = Pad <mode = "{mode}"> (x, amounts{value_arg})
        y = Conv {conv_pads} (p, w)
    }}"""


def test_zero_pad_becomes_the_conv_pads():
    m = model(_pad_conv([0, 0, 1, 2, 0, 0, 2, 1]), **W)
    out, ctx = apply("fold_pad_conv", m)
    assert ops(out) == ["Constant", "Conv"] and ctx.rewrites["fold_pad_conv"] == 1
    conv = out.graph.node[-1]
    assert [a.ints for a in conv.attribute if a.name == "pads"] == [[1, 2, 2, 1]]
    assert_same_outputs(m, out, X)


def test_pads_add_to_the_convs_own():
    m = model(_pad_conv([0, 0, 1, 1, 0, 0, 1, 1], conv_pads="<pads = [1, 0, 0, 1]>"), **W)
    out, _ = apply("fold_pad_conv", m)
    assert [a.ints for a in out.graph.node[-1].attribute if a.name == "pads"] == [[2, 1, 1, 2]]
    assert_same_outputs(m, out, X)


def test_refuses_reflect_padding_a_nonzero_value_and_channel_padding():
    for text, why in [(_pad_conv([0, 0, 1, 1, 0, 0, 1, 1], mode="reflect"), "Pad mode is 'reflect', not constant"),
                      (_pad_conv([0, 1, 1, 1, 0, 0, 1, 1]), "Pad also pads the batch or channel dim")]:
        m = model(text, **W)
        out, ctx = apply("fold_pad_conv", m)
        assert ops(out) == ops(m) and refusals(ctx) == [why]
    m = model(_pad_conv([0, 0, 1, 1, 0, 0, 1, 1], value="v"), v=np.float32(0.5), **W)
    out, ctx = apply("fold_pad_conv", m)
    assert ops(out) == ops(m) and refusals(ctx) == ["Pad value is 0.5, not 0"]
