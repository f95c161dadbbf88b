"""The zoo, exported from PyTorch, run end to end on OptimEP and compared with ONNX Runtime's CPU EP.

The MLP and the CNN must run entirely on OptimEP (CPU fallback disabled); the transformer runs with
fallback, and its placement must leave exactly the integer shape plumbing (Shape/Gather/Concat) to
the CPU EP, each with its reason."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import ISAS, assert_close, run_cpu
from optim.ep_plugin import placement, session
from optim.models import ZOO, example_inputs

# Whole models chain dozens of reordered float sums; per-op differential tests use FLOAT_* (1e-4).
ZOO_ATOL = 1e-4
ZOO_RTOL = 1e-4
FULLY_CLAIMED = {"mlp", "cnn"}
TRANSFORMER_FALLBACK_OPS = {"Shape", "Concat"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from optim.exporter import export

    out = tmp_path_factory.mktemp("zoo")
    return {name: export(name, out / f"{name}.onnx").path for name in ZOO}


def _feeds(name: str, batch: int, seed: int) -> dict[str, np.ndarray]:
    """`batch` different example inputs (batch 1 each) stacked along the batch axis."""
    parts = [example_inputs(name, seed=seed * 100 + i) for i in range(batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_matches_the_cpu_ep(exported, name, isa):
    model = str(exported[name])
    sess = session(model, fallback=name not in FULLY_CLAIMED, isa=isa)
    for batch, seed in [(1, 0), (5, 1)]:  # the second run re-plans for a new batch size
        feeds = _feeds(name, batch, seed)
        got = sess.run(None, feeds)
        ref = run_cpu(open(model, "rb").read(), feeds)
        for g, r in zip(got, ref):
            assert_close(g, r, atol=ZOO_ATOL, rtol=ZOO_RTOL, what=f"{name} batch {batch} isa {isa}")


@pytest.mark.parametrize("name", sorted(FULLY_CLAIMED))
def test_mlp_and_cnn_are_fully_on_optimep(exported, name):
    p = placement(session(str(exported[name])))
    assert p.total_nodes > 0 and p.optim_nodes == p.total_nodes, p.summary()


def test_transformer_leaves_only_integer_shape_plumbing_to_the_cpu_ep(exported):
    p = placement(session(str(exported["transformer"])))
    assert {n.op for n in p.fallback} == TRANSFORMER_FALLBACK_OPS, p.summary()
    # The Shapes and Concats that build Reshape targets stay out of OptimEP's partitions on purpose (a plan
    # knows its shapes before it runs).
    assert all("decides the shape of Reshape" in n.reason for n in p.fallback), p.summary()
    float_ops = {n.op for n in p.nodes if n.ep == "OptimEP"}
    assert {"MatMul", "Softmax", "LayerNormalization", "Erf", "Reshape", "Transpose"} <= float_ops
