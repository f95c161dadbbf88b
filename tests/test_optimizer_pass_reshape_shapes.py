"""constant_reshape_shapes: Reshape targets built at run time from the input's own dims -> constants with 0 (copy)."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from optimizer_helpers import apply, assert_same_outputs, model, ops, refusals

RNG = np.random.default_rng(0)
I64 = np.int64
X = {"x": RNG.standard_normal((2, 3, 64)).astype(np.float32)}
HEADS = {"heads": np.array([4, 16], I64), "zero": np.array([0], I64), "two": np.array([2], I64)}


def _target(m):
    reshape = next(n for n in m.graph.node if n.op_type == "Reshape")
    return next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == reshape.input[1]).tolist()


def _targets(m):
    values = {t.name: numpy_helper.to_array(t).tolist() for t in m.graph.initializer}
    return [values.get(n.input[1]) for n in m.graph.node if n.op_type == "Reshape"]


def test_torchscript_form_becomes_a_constant_and_its_shape_nodes_die():
    m = model("""g (float[batch, seq, 64] x) => (float[batch, seq, 4, 16] y) {
        s = Shape(x)
        bs = Slice(s, zero, two)
        t = Concat <axis = 0> (bs, heads)
        y = Reshape(x, t)
    }""", **HEADS)
    out, ctx = apply("constant_reshape_shapes", m)
    assert ctx.rewrites["constant_reshape_shapes"] == 1 and _target(out) == [0, 0, 4, 16]
    out, _ = apply("remove_dead_nodes", out)
    assert ops(out) == ["Reshape"]
    assert_same_outputs(m, out, X)


def test_dims_taken_from_another_tensor_with_the_same_symbolic_dims_and_allowzero_is_dropped():
    # the dynamo exporter's form: batch and sequence read off the token ids, allowzero=1
    m = model("""g (float[batch, seq, 64] x, int64[batch, seq] ids) => (float[batch, seq, 4, 16] y, float[batch, seq, 4, 16] z) {
        b = Shape <start = 0, end = 1> (ids)
        s = Shape <start = 1, end = 2> (ids)
        t = Concat <axis = 0> (b, s, heads)
        y = Reshape <allowzero = 1> (x, t)
        z = Reshape <allowzero = 1> (x, t)
    }""", **HEADS)
    out, ctx = apply("constant_reshape_shapes", m)
    assert ctx.rewrites["constant_reshape_shapes"] == 2 and _target(out) == [0, 0, 4, 16]
    reshapes = [n for n in out.graph.node if n.op_type == "Reshape"]
    assert reshapes[0].input[1] == reshapes[1].input[1] and not reshapes[0].attribute  # one shared constant
    out, _ = apply("remove_dead_nodes", out)
    assert ops(out) == ["Reshape", "Reshape"]
    assert_same_outputs(m, out, {**X, "ids": np.zeros((2, 3), I64)})


def test_refuses_dims_not_known_to_be_the_inputs():
    m = model("""g (float[batch, seq, 64] x, int64[n, m] other, int64[2] runtime) => (float[n, m, 4, 16] y, float[4, 16, 6] z) {
        b = Shape <start = 0, end = 2> (other)
        t = Concat <axis = 0> (b, heads)
        y = Reshape(x, t)
        u = Concat <axis = 0> (runtime, six)
        z = Reshape(x, u)
    }""", **HEADS, six=np.array([6], I64))
    out, ctx = apply("constant_reshape_shapes", m)
    assert ops(out) == ops(m) and ctx.rewrites["constant_reshape_shapes"] == 0
    assert refusals(ctx) == ["target dim 0 (n) is not known to equal the input's dim 0 (batch)",
                             "shape piece 'runtime' is neither a constant nor dims read by Shape"]


def test_refuses_a_literal_zero_under_allowzero():
    m = model("""g (float[batch, 0, 64] x) => (float[batch, 0, 64] y) {
        b = Shape <start = 0, end = 1> (x)
        t = Concat <axis = 0> (b, zero, sixty_four)
        y = Reshape <allowzero = 1> (x, t)
    }""", zero=np.array([0], I64), sixty_four=np.array([64], I64))
    out, ctx = apply("constant_reshape_shapes", m)
    assert ops(out) == ops(m) and refusals(ctx) == [
        "allowzero=1 and the shape holds a literal 0 (an empty dim), which a copy (0) cannot express"]


def test_dims_picked_one_at_a_time_through_reshapes_that_lose_the_name():
    # TorchScript's `t.size(0)`: Unsqueeze(Gather(Shape(t), 0)). The dims reach the Reshape through an
    # earlier Reshape with a -1, after which ONNX's own inference names the batch dim afresh (unk__N);
    # the leftover named dim of the earlier Reshape's input is its -1, so the batch is still known.
    m = model("""g (float[batch, 8, 4, 4] x) => (float[batch, 16, 8] y) {
        r = Reshape(x, flat)
        t = Transpose <perm = [0, 2, 1]> (r)
        s = Shape(x)
        b = Gather <axis = 0> (s, zero_scalar)
        bu = Unsqueeze(b, zero)
        c = Concat <axis = 0> (bu, sixteen, minus_one)
        y = Reshape(t, c)
    }""", flat=np.array([-1, 8, 16], I64), zero_scalar=np.array(0, I64), zero=np.array([0], I64),
        sixteen=np.array([16], I64), minus_one=np.array([-1], I64))
    out, ctx = apply("constant_reshape_shapes", m)
    assert ctx.rewrites["constant_reshape_shapes"] == 1 and _targets(out) == [[-1, 8, 16], [0, 16, -1]]
    out, _ = apply("remove_dead_nodes", out)
    assert ops(out) == ["Reshape", "Transpose", "Reshape"]
    assert_same_outputs(m, out, {"x": RNG.standard_normal((3, 8, 4, 4)).astype(np.float32)})


def test_named_dims_survive_broadcasts_and_matmul_batches():
    # q and k both hold `batch` under made-up names after their Reshapes; MatMul and Add outputs keep it.
    m = model("""g (float[batch, 6, 8] x) => (float[batch, 6, 6] y) {
        q = Reshape(x, qshape)
        k = Transpose <perm = [0, 2, 1]> (q)
        a = MatMul(q, k)
        z = Add(a, q6)
        s = Shape(x)
        b = Gather <axis = 0> (s, zero_scalar)
        bu = Unsqueeze(b, zero)
        c = Concat <axis = 0> (bu, six, six)
        y = Reshape(z, c)
    }""", qshape=np.array([-1, 6, 8], I64), q6=RNG.standard_normal((1, 6, 6)).astype(np.float32),
        zero_scalar=np.array(0, I64), zero=np.array([0], I64), six=np.array([6], I64))
    out, ctx = apply("constant_reshape_shapes", m)
    assert ctx.rewrites["constant_reshape_shapes"] == 1 and _targets(out) == [[-1, 6, 8], [0, 6, 6]]
    assert_same_outputs(m, out, {"x": RNG.standard_normal((2, 6, 8)).astype(np.float32)})
