"""optimize(): passes to a fixed point, the proof, the bisection that names a broken pass, the
simplification step's graceful failures, and what gets written."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import onnx
import pytest

from optimizer_helpers import AddBecomesSub, DropFirstNode, model, ops
from optim.optimizer import OptimizeError, Pass, ProofError, SimplifyFailed, format_report, optimize
from optim.optimizer import simplify as simplify_module
from optim.optimizer.passes import PASSES

RNG = np.random.default_rng(0)

# Identity, a decomposed GELU (opset 18, so the opset rises), a foldable Transpose and a dead node.
TEXT = """g (float[batch, 32] x) => (float[batch, 32] y) {
    i = Identity(x)
    wt = Transpose <perm = [1, 0]> (w)
    m = MatMul(i, wt)
    a = Add(m, b)
    s = Div(a, sqrt2)
    e = Erf(s)
    u = Add(e, one)
    h = Mul(half, u)
    y = Mul(a, h)
    dead = Neg(x)
}"""
WEIGHTS = {"w": RNG.standard_normal((32, 32)).astype(np.float32), "b": RNG.standard_normal(32).astype(np.float32),
           "sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}


@pytest.fixture
def mlp():
    return model(TEXT, **WEIGHTS)


def standard_passes() -> list[Pass]:
    return [p() for p in PASSES]


def test_passes_reach_a_fixed_point_and_the_proof_passes(mlp):
    result = optimize(mlp, simplify=False)
    assert ops(result.model) == ["Gemm", "Gelu"]
    assert result.nodes_before == 10 and result.nodes_after == 2 and result.converged
    assert result.proof.passed and result.proof.checks[0].max_abs < 1e-5
    assert (result.opset_before, result.opset_after) == (18, 20)
    assert "random (seed 0) inputs (x: float32 3x32; x: float32 5x32)" in result.proof_inputs  # two batch sizes
    assert [c.inputs for c in result.proof.checks] == [0, 1]
    assert [t.name for t in mlp.graph.initializer] == list(WEIGHTS)  # the caller's model is untouched
    assert len(mlp.graph.node) == 10


def test_report_table_and_json(mlp):
    result = optimize(mlp, simplify=False, shapes={"x": [5, 32]})
    lines = format_report(result)
    assert ["Gelu", "0", "1", "+1"] in [line.split() for line in lines]
    assert ["total", "10", "2", "-8"] in [line.split() for line in lines]
    assert any(line.startswith("  fuse_gelu") and "1 rewrites" in line for line in lines)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["nodes_before"] == 10 and data["nodes_after"] == 2 and data["proof"]["passed"]
    assert data["ops_after"] == {"Gemm": 1, "Gelu": 1} and "x: float32 5x32" in data["proof_inputs"]
    assert {p["name"] for p in data["passes"]} == {p.name for p in PASSES}


def test_a_broken_pass_is_named_and_nothing_is_written(mlp, tmp_path):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous contents")
    with pytest.raises(ProofError) as info:
        optimize(mlp, out, simplify=False, passes=standard_passes()[:2] + [AddBecomesSub()] + standard_passes())
    assert info.value.culprit == "add_becomes_sub"
    assert str(info.value).startswith("pass 'add_becomes_sub' (round 1) broke the model: output 'y' differs")
    assert out.read_bytes() == b"previous contents"
    assert sorted(os.listdir(tmp_path)) == ["out.onnx"]


def test_bisection_blames_the_pass_that_broke_structure_not_the_later_ones(mlp, tmp_path):
    passes = [standard_passes()[1], DropFirstNode()] + standard_passes()
    with pytest.raises(ProofError) as info:
        optimize(mlp, tmp_path / "out.onnx", simplify=False, passes=passes)
    assert info.value.culprit == "drop_first_node" and "onnx.checker rejects it" in info.value.problem
    assert not (tmp_path / "out.onnx").exists()


def test_check_each_pass_stops_at_the_broken_pass(mlp):
    with pytest.raises(ProofError, match="pass 'add_becomes_sub'") as info:
        optimize(mlp, simplify=False, check_each_pass=True, passes=[AddBecomesSub()] + standard_passes())
    assert info.value.culprit == "add_becomes_sub"


def test_a_rewrite_that_bakes_in_one_size_fails_on_the_other():
    class BakeShape(Pass):
        name, summary = "bake_shape", "replaces Shape by the shape seen once (wrong for dynamic dims)"

        def run(self, m, ctx):
            shape = next((n for n in m.graph.node if n.op_type == "Shape"), None)
            if shape is None:
                return m, False
            shape.CopyFrom(onnx.helper.make_node("Constant", [], list(shape.output),
                                                 value=onnx.numpy_helper.from_array(np.array([3, 4], np.int64))))
            return m, True

    m = model("""g (float[batch, 4] x) => (float[batch, 4] y) {
        s = Shape(x)
        r = Relu(x)
        y = Reshape(r, s)
    }""")
    with pytest.raises(ProofError, match="pass 'bake_shape' .* ONNX Runtime cannot run it") as info:
        optimize(m, simplify=False, passes=[BakeShape()])
    assert info.value.culprit == "bake_shape"


def test_rounds_stop_at_the_cap():
    class AlwaysChanges(Pass):
        name, summary = "always_changes", "reports a change every time"

        def run(self, m, ctx):
            m.graph.node[0].name = m.graph.node[0].name + "x"
            return m, True

    m = model(TEXT, **WEIGHTS)
    result = optimize(m, simplify=False, passes=[AlwaysChanges()], max_rounds=3)
    assert result.rounds == 3 and not result.converged
    assert any("stopped at the cap" in line for line in format_report(result))


def test_skip_and_only_pick_passes_and_unknown_names_are_refused(mlp):
    kept = optimize(mlp, simplify=False, skip=["fuse-gelu"])
    assert "Erf" in ops(kept.model) and kept.opset_after == 18
    only = optimize(mlp, simplify=False, only=["remove_identity", "remove_dead_nodes"])
    assert [p.name for p in only.passes] == ["remove_identity", "remove_dead_nodes"]
    assert len(only.model.graph.node) == 8
    with pytest.raises(OptimizeError, match="no pass named 'fuse_gelus' \\(--skip\\); passes are fold_constants, "):
        optimize(mlp, skip=["fuse_gelus"])


def test_simplification_is_used_when_it_passes_the_proof(mlp):
    result = optimize(mlp)
    assert result.simplify.status == "used" and result.simplify.nodes_after < result.simplify.nodes_before
    assert ops(result.model) == ["Gemm", "Gelu"]


def test_simplification_failures_leave_the_model_to_our_passes(mlp):
    def fails(m):
        raise SimplifyFailed("onnxsim crashed (signal 11)")

    def wrong(m):
        broken = onnx.ModelProto()
        broken.CopyFrom(m)
        broken.graph.node[-2].op_type = "Add"  # Mul -> Add: different numbers
        return broken

    for simplifier, status, reason in ((fails, "failed", "onnxsim crashed (signal 11)"),
                                       (wrong, "discarded", "onnxsim's result failed the proof: output 'y' differs")):
        result = optimize(mlp, simplifier=simplifier)
        assert result.simplify.status == status and result.simplify.reason.startswith(reason)
        assert ops(result.model) == ["Gemm", "Gelu"] and result.proof.passed


def test_a_crashing_onnxsim_process_is_reported_not_fatal(mlp, tmp_path, monkeypatch):
    child = tmp_path / "crash.py"
    child.write_text("import os\nos.abort()\n")
    monkeypatch.setattr(simplify_module, "_CHILD", child)
    with pytest.raises(SimplifyFailed, match=r"onnxsim crashed \(signal 6\)"):
        simplify_module.run_onnxsim(mlp)


def test_output_is_written_checked_and_keeps_external_data(mlp, tmp_path):
    source = tmp_path / "in.onnx"
    onnx.save_model(mlp, str(source), save_as_external_data=True, location="in.onnx.data", size_threshold=0)
    result = optimize(source, tmp_path / "out.onnx", simplify=False)
    assert result.output == str(tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx.data").exists()
    written = onnx.load(str(tmp_path / "out.onnx"))
    onnx.checker.check_model(written, full_check=True)
    assert ops(written) == ["Gemm", "Gelu"]


def test_user_errors_are_one_sentence(mlp, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    with pytest.raises(OptimizeError, match="is not an ONNX model"):
        optimize(bad)
    with pytest.raises(OptimizeError, match="no model input named 'z'"):
        optimize(mlp, shapes={"z": [1, 32]})
    invalid = onnx.ModelProto()
    invalid.CopyFrom(mlp)
    invalid.graph.node[2].input[1] = "missing"
    with pytest.raises(OptimizeError, match="the input model fails onnx.checker"):
        optimize(invalid)
    with pytest.raises(OptimizeError, match="the input model fails on ONNX Runtime with given inputs"):
        optimize(mlp, inputs={"x": np.zeros((2, 3), np.float32)})


# A strided backbone: the image is pooled 32x and upsampled back onto itself, so it needs sides that are a multiple
# of 32 (a detector's FPN does the same); random 3x3 / 5x5 images fail on the input model itself.
STRIDED = """g (float[batch, 4, height, width] x) => (float[batch, 4, height, width] y) {
    i = Identity(x)
    p = MaxPool <kernel_shape = [32, 32], strides = [32, 32]> (i)
    u = Resize <mode = "nearest"> (p, , scales)
    y = Add(i, u)
}"""


def test_a_model_that_needs_image_sizes_is_proven_at_224_and_320():
    m = model(STRIDED, scales=np.float32([1, 1, 32, 32]))
    result = optimize(m)
    assert result.proof.passed and ops(result.model) == ["MaxPool", "Resize", "Add"]
    report = "\n".join(format_report(result))
    assert "x: float32 2x4x224x224; x: float32 3x4x320x320" in report
    assert "proof: passed on random (seed 0) at image-like sizes (it fails on x 3x4x3x3) inputs (x: float32 2x4x224x224; " in report


def test_a_model_that_fails_at_every_size_names_them_all():
    m = model(STRIDED.replace("[32, 32], strides = [32, 32]", "[1000, 1000], strides = [1000, 1000]"),
              scales=np.float32([1, 1, 1000, 1000]))
    with pytest.raises(OptimizeError, match=r"fails on ONNX Runtime with random \(seed 0\) inputs \(x 3x4x3x3; "
                                            r"x 2x4x224x224; x 2x4x320x320\): .*give real inputs \(--inputs\) or shapes"):
        optimize(m)
