"""Nodes inside If / Loop / Scan bodies: ONNX Runtime offers each subgraph to OptimEP in a GetCapability call
of its own, with outer-scope values (the main graph's inputs, initializers and node outputs) as inputs of the
subgraph's nodes. OptimEP claims what is inside; the control-flow node itself stays with the CPU EP, which runs
its subgraphs. Also run under ASan/UBSan (make test-asan)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from helpers import IR_VERSION, ISAS, assert_close, rand, run_cpu, tensor_info
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(14)
CONTROL_FLOW = "control flow stays with ONNX Runtime's CPU EP, which runs the {}'s subgraph(s); their nodes are offered to OptimEP separately"


def _value(name: str, dtype=T.FLOAT, shape=("a", "b")):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def _model(nodes, inputs: dict, outputs: dict, initializers: dict) -> bytes:
    """inputs: name -> (np dtype, shape); outputs: name -> shape (float32); explicit, as inference cannot
    always see through Loop outputs."""
    graph = helper.make_graph(nodes, "main", [tensor_info(n, dt, s) for n, (dt, s) in inputs.items()],
                              [_value(n, T.FLOAT, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def sample_rate_switch() -> bytes:
    """A voice-activity-style front end: If (sr == 16000) picks one of two conv branches, the first reading its
    weights from the main graph (outer scope), the second from its own initializer; then a Loop runs
    MatMul + Add + Tanh three times on the flattened features, its weights also from the outer scope."""
    then_branch = helper.make_graph(
        [N("Conv", ["x", "w16k"], ["c16"], pads=[1, 1, 1, 1], name="conv_16k"), N("Relu", ["c16"], ["y16"], name="relu_16k")],
        "branch_16k", [], [_value("y16", shape=(1, 4, 8, 8))])
    else_branch = helper.make_graph(
        [N("Conv", ["x", "w8k"], ["c8"], strides=[1, 1], pads=[1, 1, 1, 1], name="conv_8k"),
         N("Sigmoid", ["c8"], ["y8"], name="sigmoid_8k")],
        "branch_8k", [], [_value("y8", shape=(1, 4, 8, 8))], [numpy_helper.from_array(rand(RNG, 4, 4, 3, 3), "w8k")])
    body = helper.make_graph(
        [N("MatMul", ["h_in", "w_loop"], ["m"], name="loop_matmul"), N("Add", ["m", "b_loop"], ["a"], name="loop_add"),
         N("Tanh", ["a"], ["h_out"], name="loop_tanh"), N("Identity", ["cond_in"], ["cond_out"], name="loop_cond")],
        "loop_body", [_value("i", T.INT64, ()), _value("cond_in", T.BOOL, ()), _value("h_in", shape=(1, 256))],
        [_value("cond_out", T.BOOL, ()), _value("h_out", shape=(1, 256))])
    nodes = [N("Equal", ["sr", "sr_16k"], ["is_16k"], name="is_16k"),
             N("If", ["is_16k"], ["features"], then_branch=then_branch, else_branch=else_branch, name="sr_switch"),
             N("Flatten", ["features"], ["flat"], axis=1, name="flatten"),
             N("Loop", ["trips", "", "flat"], ["h"], body=body, name="recurrence")]
    return _model(nodes, {"x": (np.float32, [1, 4, 8, 8]), "sr": (np.int64, [])}, {"h": (1, 256)},
                  {"w16k": rand(RNG, 4, 4, 3, 3), "sr_16k": np.array(16000, np.int64), "trips": np.array(3, np.int64),
                   "w_loop": rand(RNG, 256, 256) * 0.1, "b_loop": rand(RNG, 256)})


# ORT's basic rewrites run inside bodies too: the Loop's MatMul + Add arrive as one Gemm.
BODY_NODES = {"conv_16k", "relu_16k", "conv_8k", "sigmoid_8k", "loop_matmul/MatMulAddFusion", "loop_tanh", "loop_cond"}


def test_nodes_inside_if_and_loop_bodies_run_on_optimep():
    p = placement(session(sample_rate_switch()))
    on_optim = {n.node for n in p.nodes if n.ep == "OptimEP"}
    assert BODY_NODES | {"is_16k", "flatten"} == on_optim, p.summary()
    assert {(n.node, n.reason) for n in p.fallback} == {
        ("sr_switch", CONTROL_FLOW.format("If")), ("recurrence", CONTROL_FLOW.format("Loop"))}
    # Each branch's Conv became OptimEP's convolution, its weights read from the outer scope or the branch.
    steps = [s for partition in p.compiled.values() for s in partition]
    assert any(s.startswith("NhwcConv 'conv_16k'") for s in steps) and any(s.startswith("NhwcConv 'conv_8k'") for s in steps)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("sr", [16000, 8000])
def test_each_branch_and_the_loop_equal_the_cpu_ep(isa, sr):
    model = sample_rate_switch()
    feeds = {"x": rand(RNG, 1, 4, 8, 8), "sr": np.array(sr, np.int64)}
    sess = session(model, isa=isa)
    for _ in range(2):  # the second run reuses the plans ORT keeps per subgraph
        assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], what=f"sr={sr}")


def nested_and_implicit() -> bytes:
    """main: r = Relu(x) is read inside the Loop's body (an implicit input of the Loop) and again by the Add
    after it; the body holds an If on the iteration's parity whose branches read r and the carried value;
    a Scan sums MatMul rows. Fusing the two main-graph nodes would put the Loop between them: a cycle."""
    then_branch = helper.make_graph([N("Add", ["v_in", "r"], ["t"], name="then_add"),
                                     N("Mul", ["t", "half"], ["t_out"], name="then_mul")],
                                    "even", [], [_value("t_out", shape=(2, 3))])
    else_branch = helper.make_graph([N("Sub", ["v_in", "r"], ["e_out"], name="else_sub")], "odd", [],
                                    [_value("e_out", shape=(2, 3))])
    body = helper.make_graph(
        [N("Cast", ["i"], ["fi"], to=T.FLOAT, name="cast_i"), N("Less", ["fi", "one_and_half"], ["early"], name="early"),
         N("If", ["early"], ["u"], then_branch=then_branch, else_branch=else_branch, name="parity"),
         N("Add", ["u", "fi"], ["v_out"], name="add_i"), N("Reshape", ["v_out", "flat_shape"], ["row"], name="to_row"),
         N("Identity", ["cond_in"], ["cond_out"], name="cond")],
        "body", [_value("i", T.INT64, ()), _value("cond_in", T.BOOL, ()), _value("v_in", shape=(2, 3))],
        [_value("cond_out", T.BOOL, ()), _value("v_out", shape=(2, 3)), _value("row", shape=(6,))],
        [numpy_helper.from_array(np.array(1.5, np.float32), "one_and_half")])
    scan_body = helper.make_graph(
        [N("MatMul", ["x_row", "w_scan"], ["p"], name="scan_matmul"), N("Add", ["acc_in", "p"], ["acc_out"], name="scan_add"),
         N("Relu", ["acc_out"], ["y_row"], name="scan_relu")],
        "scan_body", [_value("acc_in", shape=(1, 6)), _value("x_row", shape=(1, 6))],
        [_value("acc_out", shape=(1, 6)), _value("y_row", shape=(1, 6))])
    nodes = [N("Relu", ["x"], ["r"], name="main_relu"),
             N("Loop", ["trips", "", "x"], ["v", "rows"], body=body, name="loop"),
             N("Add", ["v", "r"], ["y"], name="main_add"),
             N("Scan", ["acc0", "seq"], ["acc", "ys"], body=scan_body, num_scan_inputs=1, name="scan")]
    return _model(nodes, {"x": (np.float32, [2, 3]), "seq": (np.float32, [5, 1, 6])},
                  {"y": (2, 3), "rows": ("k", 6), "acc": (1, 6), "ys": (5, 1, 6)},
                  {"trips": np.array(4, np.int64), "half": np.array(0.5, np.float32), "flat_shape": np.array([-1], np.int64),
                   "acc0": np.zeros((1, 6), np.float32), "w_scan": rand(RNG, 6, 6)})


def test_nested_bodies_scan_and_implicit_inputs():
    model = nested_and_implicit()
    sess = session(model)
    p = placement(sess)
    assert {n.node for n in p.fallback} == {"loop", "parity", "scan"}, p.summary()
    # main_relu feeds the Loop through its body: it must not share a fused node with main_add.
    partitions = {name: {s.split("'")[1] for s in steps} for name, steps in p.compiled.items()}
    assert not any({"main_relu", "main_add"} <= nodes for nodes in partitions.values()), partitions
    feeds = {"x": rand(RNG, 2, 3), "seq": rand(RNG, 5, 1, 6)}
    for ours, ref, name in zip(sess.run(None, feeds), run_cpu(model, feeds), ["y", "rows", "acc", "ys"]):
        assert_close(ours, ref, what=name)
