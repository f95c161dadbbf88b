"""The vector exp/erf/sigmoid/tanh/GELU/SiLU approximations (AVX2, and AVX-512 where the CPU has it) against
the scalar reference (libm) over a dense grid and the special values: named accuracy bounds, identical NaN/inf
behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, make_model
from optim.ep_plugin import session

# (relative, absolute): |fast - libm| <= relative * |libm| + absolute
# Exp flushes results below e^-87 (1.65e-38, just above the smallest normal float) to 0, hence its
# absolute term.
ACCURACY = {"Exp": (2e-7, 1.7e-38), "Erf": (1e-6, 5e-7), "Sigmoid": (5e-7, 2e-7), "Tanh": (2e-6, 5e-7),
            "Gelu": (2e-6, 5e-7), "GeluTanh": (2e-6, 5e-7), "Silu": (5e-7, 2e-7)}
VECTOR_ISAS = [isa for isa in ISAS if isa != "scalar"]
GRID = np.concatenate([
    np.linspace(-100, 100, 200_001), np.linspace(-6, 6, 120_001), np.geomspace(1e-30, 1e-2, 2_000),
    -np.geomspace(1e-30, 1e-2, 2_000),
    np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.7, 88.72, 88.73, -87.3, -87.4, -103.0, -110.0]),
]).astype(np.float32)


def _model(op: str) -> bytes:
    n = helper.make_node
    if op == "Silu":  # x * Sigmoid(x), which OptimEP folds into one SiLU step
        nodes = [n("Sigmoid", ["x"], ["s"]), n("Mul", ["x", "s"], ["y"])]
    elif op == "GeluTanh":
        nodes = [n("Gelu", ["x"], ["y"], approximate="tanh")]
    else:
        nodes = [n(op, ["x"], ["y"])]
    return make_model(nodes, {"x": (np.float32, [GRID.size])}, ["y"], opset=20 if op.startswith("Gelu") else 17)


@pytest.mark.parametrize("isa", VECTOR_ISAS)
@pytest.mark.parametrize("op", sorted(ACCURACY))
def test_vector_approximation_is_within_its_bound_of_libm(op, isa):
    model = _model(op)
    fast = session(model, isa=isa, fallback=False).run(None, {"x": GRID})[0]
    ref = session(model, isa="scalar", fallback=False).run(None, {"x": GRID})[0]
    assert np.array_equal(np.isnan(fast), np.isnan(ref)), f"{op}: NaN positions differ"
    special = np.isinf(ref)
    assert np.array_equal(fast[special], ref[special]), f"{op}: infinities differ"
    finite = np.isfinite(ref)
    err = np.abs(fast[finite].astype(np.float64) - ref[finite])
    mag = np.abs(ref[finite].astype(np.float64))
    rel_bound, abs_bound = ACCURACY[op]
    bad = err > rel_bound * mag + abs_bound
    assert not bad.any(), (f"{op}: {int(bad.sum())} values off, worst x={GRID[finite][bad][np.argmax(err[bad])]!r} "
                           f"err={err[bad].max():.3g}")
