"""--freeze (optimizer/freeze.py) and the pass that decides an If with a constant condition
(inline_constant_if): values cast to the declared dtype and shape, clear errors, branches inlined with their
initializers, outer values and nested nodes; the CLI end to end is in test_cli_export_args.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from optim.ep_plugin import cpu_session
from optim.optimizer import OptimizeError, optimize
from optim.optimizer.freeze import freeze_inputs, parse_freeze
from optimizer_helpers import apply, assert_same_outputs, ops, refusals

X = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}


def switch_model(flag_type=TensorProto.BOOL, flag_dims=(), cond_from_flag=True) -> onnx.ModelProto:
    """y = If(flag) then x * two (two a branch initializer) else Neg(x) + bias (an outer initializer); z = x passed
    through by either branch."""
    then = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"]), helper.make_node("Identity", ["x"], ["pt"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("pt", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.float32(2), "two")])
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Add", ["n", "bias"], ["e"]),
         helper.make_node("Identity", ["x"], ["pe"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("pe", TensorProto.FLOAT, [2, 3])])
    nodes = []
    cond = "flag"
    if flag_type != TensorProto.BOOL:
        nodes.append(helper.make_node("Cast", ["flag"], ["cond"], to=TensorProto.BOOL))
        cond = "cond"
    nodes.append(helper.make_node("If", [cond], ["y", "z"], name="switch", then_branch=then, else_branch=other))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("flag", flag_type, list(flag_dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.float32([1, 2, 3]), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("value, taken", [(True, "then"), (False, "else")])
def test_an_if_on_a_constant_becomes_its_branch(value, taken):
    m = switch_model()
    frozen, shown = freeze_inputs(m, {"flag": "true" if value else "false"})
    assert shown == {"flag": str(value)} and [i.name for i in frozen.graph.input] == ["x"]
    out, ctx = apply("inline_constant_if", frozen)
    assert "If" not in ops(out) and ctx.rewrites["inline_constant_if"] == 1
    onnx.checker.check_model(out, full_check=True)
    assert ops(out) == (["Mul"] if value else ["Neg", "Add"]) + ["Identity"] * 3  # the outputs reached through Identity
    assert_same_outputs(frozen, out, X)
    reference = switch_model()
    want = cpu_session(reference.SerializeToString()).run(None, {**X, "flag": np.array(value)})
    got = cpu_session(out.SerializeToString()).run(None, X)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)


def test_optimize_with_freeze_removes_the_input_and_the_if():
    result = optimize(switch_model(TensorProto.INT64, (1,)), freeze={"flag": 0})
    assert result.frozen == {"flag": "[0]"} and "If" not in result.ops_after and "Cast" not in result.ops_after
    assert [i.name for i in result.model.graph.input] == ["x"] and result.proof.passed


def test_an_if_on_a_run_time_value_stays():
    out, ctx = apply("inline_constant_if", switch_model())
    assert "If" in ops(out) and ctx.rewrites["inline_constant_if"] == 0


def test_a_condition_of_several_values_is_refused():
    m = switch_model()
    frozen, _ = freeze_inputs(m, {"flag": "true"})
    frozen.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([True, False]), "flag"))
    out, ctx = apply("inline_constant_if", frozen)
    assert "If" in ops(out) and refusals(ctx) == ["its condition holds 2 values, not one"]


def test_freeze_casts_and_checks_values():
    m = switch_model(TensorProto.INT64, (1,))
    frozen, shown = freeze_inputs(m, {"flag": "16000"})
    value = numpy_helper.to_array(next(t for t in frozen.graph.initializer if t.name == "flag"))
    assert value.dtype == np.int64 and value.tolist() == [16000] and shown == {"flag": "[16000]"}
    frozen, _ = freeze_inputs(m, {"flag": np.array([7])})
    assert numpy_helper.to_array(next(t for t in frozen.graph.initializer if t.name == "flag")).tolist() == [7]
    assert [i.name for i in m.graph.input] == ["x", "flag"]  # the caller's model is untouched
    with pytest.raises(OptimizeError, match=r"--freeze flag: shape \[2\] does not fit the input's \[1\]"):
        freeze_inputs(m, {"flag": np.array([1, 2])})
    with pytest.raises(OptimizeError, match="out of int64's range"):
        freeze_inputs(m, {"flag": "1e30"})
    with pytest.raises(OptimizeError, match="input 'flag' is bool; give true or false"):
        freeze_inputs(switch_model(), {"flag": "yes"})
    with pytest.raises(OptimizeError, match=r"--freeze x=1: input 'x' has dynamic dims \['batch', 3\]"):
        dynamic = switch_model()
        dynamic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
        freeze_inputs(dynamic, {"x": "1"})
    assert parse_freeze(" sr = 16000 ") == ("sr", "16000")
