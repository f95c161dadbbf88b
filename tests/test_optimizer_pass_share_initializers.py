"""share_initializers: identical weights (64 KiB or more) stored once, readers renamed, in subgraphs too; small
tensors, different values and signature names left alone. End to end: a weight the TorchScript exporter shares
through an Identity stays one tensor after `optim optimize`."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from click.testing import CliRunner
from onnx import helper, numpy_helper

from optim.cli import main
from optim.optimizer.passes.share_initializers import SHARE_MIN_BYTES, _key
from optimizer_helpers import apply, assert_same_outputs, model, refusals

N = 128  # 128 x 128 float32 = 64 KiB: just shared
RNG = np.random.default_rng(0)
W = RNG.standard_normal((N, N)).astype(np.float32)
X = {"x": RNG.standard_normal((2, N)).astype(np.float32)}
TWO_MATMULS = f"""g (float[2, {N}] x) => (float[2, {N}] y) {{
    h = MatMul(x, w1)
    y = MatMul(h, w2)
}}"""


def names(m: onnx.ModelProto) -> list[str]:
    return [t.name for t in m.graph.initializer]


def test_identical_weights_are_stored_once():
    assert W.nbytes == SHARE_MIN_BYTES
    m = model(TWO_MATMULS, w1=W, w2=W.copy())
    out, ctx = apply("share_initializers", m)
    assert names(out) == ["w1"] and [list(n.input) for n in out.graph.node] == [["x", "w1"], ["h", "w1"]]
    assert ctx.rewrites["share_initializers"] == 1
    assert_same_outputs(m, out, X)


def test_different_values_small_tensors_and_other_shapes_stay_apart():
    other = W.copy()
    other[5, 7] += 1.0
    out, _ = apply("share_initializers", model(TWO_MATMULS, w1=W, w2=other))
    assert names(out) == ["w1", "w2"]
    small = W[:64, :64].copy()  # 16 KiB
    m = model("""g (float[2, 64] x) => (float[2, 64] y) {
        h = MatMul(x, w1)
        y = MatMul(h, w2)
    }""", w1=small, w2=small.copy())
    out, ctx = apply("share_initializers", m)
    assert names(out) == ["w1", "w2"] and ctx.rewrites["share_initializers"] == 0
    # Same bytes, other shape: not the same tensor.
    assert _key(numpy_helper.from_array(W, "a")) != _key(numpy_helper.from_array(W.reshape(N // 2, 2 * N), "b"))
    assert _key(numpy_helper.from_array(W, "a")) == _key(numpy_helper.from_array(W.copy(), "b"))


def test_an_initializer_the_signature_names_stays():
    m = model(f"""g (float[2, {N}] x, float[{N}, {N}] w2) => (float[2, {N}] y) {{
        h = MatMul(x, w1)
        y = MatMul(h, w2)
    }}""", w1=W, w2=W.copy())
    out, ctx = apply("share_initializers", m)
    assert names(out) == ["w1", "w2"] and ctx.rewrites["share_initializers"] == 0
    assert refusals(ctx) == ["same values as 'w1', but the graph's signature names it"]


def test_readers_inside_a_subgraph_are_renamed():
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w2"], ["t"])], "then", [],
                             [helper.make_empty_tensor_value_info("t")])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["e"])], "else", [],
                              [helper.make_empty_tensor_value_info("e")])
    m = model(f"""g (float[2, {N}] x, bool c) => (float[2, {N}] y) {{
        y = Identity(x)
    }}""", w1=W, w2=W.copy())
    m.graph.node[0].CopyFrom(helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other))
    onnx.checker.check_model(m, full_check=True)
    out, _ = apply("share_initializers", m)
    assert names(out) == ["w1"] and out.graph.node[0].attribute[0].g.node[0].input[1] == "w1"
    onnx.checker.check_model(out, full_check=True)
    for c in (True, False):
        assert_same_outputs(m, out, {**X, "c": np.array(c)})


class LinearTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.fc(torch.relu(self.fc(x)))


def test_optimize_keeps_a_weight_the_exporter_shared_as_one_tensor(tmp_path):
    src = tmp_path / "twice.onnx"
    torch.onnx.export(LinearTwice().eval(), (torch.randn(1, 8, 256),), str(src), dynamo=False, input_names=["x"])
    before = onnx.load(str(src))
    assert "Identity" in [n.op_type for n in before.graph.node]  # the exporter's second read of the weight
    out = tmp_path / "twice.opt.onnx"
    result = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    weights = [t for t in onnx.load(str(out)).graph.initializer if list(t.dims) == [256, 256]]
    assert len(weights) == 1
    assert out.stat().st_size < 1.1 * src.stat().st_size
