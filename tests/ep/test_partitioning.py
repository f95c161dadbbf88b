"""What OptimEP claims: groups that never form a cycle with the CPU EP's nodes, the reasons it gives
for what it leaves, and the EP options that steer it."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import assert_close, make_model, rand, run_cpu
from optim.ep_plugin import OptimEPError, UnclaimedNodesError, placement, session

N = helper.make_node
RNG = np.random.default_rng(99)


def _diamond() -> bytes:
    """r1 feeds both TopK (not an OptimEP op) and the Add that also reads TopK's result through r2.
    Fusing r1 with the Add would make the fused node both feed and consume TopK: a cycle."""
    return make_model(
        [N("Relu", ["x"], ["r1"], name="r1"), N("TopK", ["r1", "k"], ["t", "ti"], name="topk", axis=-1),
         N("Relu", ["t"], ["r2"], name="r2"), N("Shrink", ["r1"], ["r1s"], name="shrink", lambd=0.5),
         N("Add", ["r1s", "r2"], ["y"], name="add")],
        {"x": (np.float32, [4, 8])}, ["y"],
        {"k": np.array([8], np.int64)},
    )


def test_groups_split_around_refused_nodes_and_results_stay_right():
    model = _diamond()
    sess = session(model)
    p = placement(sess)
    on_optim = {n.node for n in p.nodes if n.ep == "OptimEP"}
    assert on_optim == {"r1", "r2", "add"}, p.summary()
    assert {(n.node, n.reason) for n in p.fallback} == {
        ("topk", "op TopK is not implemented by OptimEP"), ("shrink", "op Shrink is not implemented by OptimEP")}
    x = rand(RNG, 4, 8)
    assert_close(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])


def test_min_partition_nodes_leaves_small_groups_with_the_reason():
    p = placement(session(_diamond(), min_partition_nodes=2))
    refused = {n.node: n.reason for n in p.fallback}
    assert refused["r1"] == "its connected group of 1 supported node(s) is below min_partition_nodes=2"
    assert {n.node for n in p.nodes if n.ep == "OptimEP"} == {"r2", "add"}


def test_fallback_disabled_names_each_refused_node():
    with pytest.raises(UnclaimedNodesError) as e:
        session(_diamond(), fallback=False)
    assert "TopK 'topk'" in str(e.value) and "Shrink 'shrink'" in str(e.value)


def test_float64_nodes_are_refused_with_the_dtype():
    model = make_model([N("Relu", ["x"], ["y"], name="relu64")], {"x": (np.float64, [3])}, ["y"])
    p = placement(session(model))
    assert [(n.node, n.reason) for n in p.fallback] == [("relu64", "input 'x' is float64 (OptimEP's Relu runs float32)")]


@pytest.mark.parametrize("option, value, says", [
    ("isa", "avx9000", "OptimEP: option isa='avx9000' is not one of auto, scalar, avx2, avxvnni, avx512, avx512vnni, amx"),
    ("min_partition_nodes", "many", "OptimEP: option min_partition_nodes='many' is not a non-negative integer"),
    ("log", "yes", "OptimEP: option log='yes' is not 0 or 1"),
    ("winograd", "yes", "OptimEP: option winograd='yes' is not 0 or 1"),
])
def test_bad_ep_option_fails_the_session_instead_of_silently_running_on_cpu(option, value, says, capsys):
    model = make_model([N("Relu", ["x"], ["y"])], {"x": (np.float32, [3])}, ["y"])
    with pytest.raises(OptimEPError) as e:
        session(model, **{option: value})
    assert str(e.value) == says
    assert capsys.readouterr().out == "", "onnxruntime's own retry notice must not reach stdout"


def test_one_session_per_isa_in_the_same_process_gives_each_its_kernels():
    model = make_model([N("Relu", ["x"], ["y"])], {"x": (np.float32, [3])}, ["y"])
    assert placement(session(model, isa="scalar")).isa == "scalar"
    assert placement(session(model, isa="avx2")).isa == "avx2"
