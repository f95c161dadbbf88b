"""Float MatMul + bias Add folded into one step (rewrites/matmul_bias.cc, the SGEMM epilogue adds the bias):
the results match ONNX Runtime's CPU EP on every ISA, the step label names the Add, and Adds that are not a
bias of B's columns stay separate. Also the parallel copies of large Concats and Reshapes (ops/indexing.cc,
ops/shape_ops.cc), which cut the output's bytes into chunks across inputs and rows."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu
from optim.ep_plugin import placement, session

N = helper.make_node
RNG = np.random.default_rng(31)


def _steps(sess) -> list[str]:
    return [s for steps in placement(sess).compiled.values() for s in steps]


# Leading dims named, as an exported transformer's batch and sequence are (ONNX Runtime's own MatMul + Add
# fusion into Gemm needs them known).
@pytest.mark.parametrize("a_shape, bias_shape", [(["batch", 7, 24], [40]), (["batch", "seq", 24], [1, 40]),
                                                 ([3, "batch", 9, 24], [1, 1, 40])])
def test_a_bias_of_the_weights_columns_runs_in_the_matmul(a_shape, bias_shape):
    model = make_model([N("MatMul", ["a", "w"], ["mm"], name="mm"), N("Add", ["bias", "mm"], ["y"], name="add")],
                       {"a": (np.float32, a_shape)}, ["y"], {"w": rand(RNG, 24, 40), "bias": rand(RNG, *bias_shape)})
    feeds = {"a": rand(RNG, *[d if isinstance(d, int) else 2 for d in a_shape])}
    ref = run_cpu(model, feeds)[0]
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert _steps(sess) == ["MatMul 'mm' + Add 'add'"], _steps(sess)
        assert placement(sess).rewrites.get("matmul_bias") == 1
        assert_close(sess.run(None, feeds)[0], ref, what=isa)


@pytest.mark.parametrize("why, bias_shape, b_const", [
    ("a bias per row and column", [6, 40], True), ("a bias of higher rank than A", [1, 1, 1, 40], True),
    ("weights computed at run time", [40], False)])
def test_other_adds_after_a_matmul_stay_separate(why, bias_shape, b_const):
    inputs = {"a": (np.float32, ["batch", 6, 24])}
    inits = {"bias": rand(RNG, *bias_shape)}
    feeds = {"a": rand(RNG, 2, 6, 24)}
    if b_const:
        inits["w"] = rand(RNG, 24, 40)
    else:
        inputs["w"] = (np.float32, [24, 40])
        feeds["w"] = rand(RNG, 24, 40)
    model = make_model([N("MatMul", ["a", "w"], ["mm"], name="mm"), N("Add", ["mm", "bias"], ["y"], name="add")],
                       inputs, ["y"], inits)
    sess = session(model, fallback=False)
    assert "MatMul 'mm'" in _steps(sess) and "Add 'add'" in _steps(sess), why
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], what=why)


def test_a_matmul_whose_output_is_also_read_elsewhere_keeps_its_add():
    model = make_model([N("MatMul", ["a", "w"], ["mm"], name="mm"), N("Add", ["mm", "bias"], ["y"], name="add"),
                        N("Relu", ["mm"], ["z"], name="relu")],
                       {"a": (np.float32, ["batch", 4, 8])}, ["y", "z"], {"w": rand(RNG, 8, 16), "bias": rand(RNG, 16)})
    sess = session(model, fallback=False)
    assert "matmul_bias" not in placement(sess).rewrites
    feeds = {"a": rand(RNG, 3, 4, 8)}
    for got, want in zip(sess.run(None, feeds), run_cpu(model, feeds)):
        assert_close(got, want)


@pytest.mark.parametrize("bias, approximate", [(True, "none"), (True, "tanh"), (False, "none")])
def test_a_gelu_after_the_matmul_runs_on_its_blocks_with_the_bits_of_the_gelu_step(bias, approximate):
    """A transformer's MLP middle: MatMul (+ bias) + Gelu in one step, the Gelu run on each finished block of
    the output (200 columns: 13 panels, the last one part-filled; 300 rows: several tasks). Same bytes as the
    Gelu as a step of its own (kept apart by reading the MatMul's result twice), on every ISA."""
    inits = {"w": rand(RNG, 64, 200), "bias": rand(RNG, 200)} if bias else {"w": rand(RNG, 64, 200)}

    def model(apart: bool):
        nodes = [N("MatMul", ["a", "w"], ["mm"], name="mm")]
        if bias:
            nodes.append(N("Add", ["mm", "bias"], ["pre"], name="add"))
        nodes.append(N("Gelu", ["pre" if bias else "mm"], ["y"], name="gelu", approximate=approximate))
        outputs = ["y", "pre" if bias else "mm"] if apart else ["y"]
        return make_model(nodes, {"a": (np.float32, ["batch", 150, 64])}, outputs, inits, opset=20)
    folded, apart = model(False), model(True)
    feeds = {"a": rand(RNG, 2, 150, 64)}
    ref = run_cpu(folded, feeds)[0]
    label = "MatMul 'mm'" + (" + Add 'add'" if bias else "") + " + Gelu 'gelu'"
    for isa in ISAS:
        sess = session(folded, fallback=False, isa=isa)
        assert _steps(sess) == [label], _steps(sess)
        got = sess.run(None, feeds)[0]
        sess_apart = session(apart, fallback=False, isa=isa)
        assert "Gelu 'gelu'" in _steps(sess_apart), _steps(sess_apart)
        np.testing.assert_array_equal(got, sess_apart.run(None, feeds)[0], err_msg=isa)
        assert_close(got, ref, what=isa)


@pytest.mark.parametrize("axis, parts", [(3, [256, 0, 256, 100, 256]), (1, [3, 1, 5]), (0, [2, 3])])
def test_large_concats_and_reshapes_copy_every_byte_in_place(axis, parts):
    """Tens of thousands of rows cut into chunks that start and end inside the inputs' blocks (an empty input
    among them), and a Reshape of a value read twice (a copy, not a view)."""
    base = [2, 40, 48, 8]
    shapes = [[p if d == axis else base[d] for d in range(4)] for p in parts]
    inputs = {f"x{i}": (np.float32, s) for i, s in enumerate(shapes)}
    nodes = [N("Concat", list(inputs), ["cat"], axis=axis, name="cat"), N("Reshape", ["cat", "shape"], ["y"], name="flat"),
             N("Relu", ["cat"], ["z"], name="relu")]
    model = make_model(nodes, inputs, ["y", "z"], {"shape": np.array([-1], np.int64)})
    feeds = {name: rand(RNG, *s) for name, s in zip(inputs, shapes)}
    want = run_cpu(model, feeds)
    for isa in ISAS:
        got = session(model, fallback=False, isa=isa).run(None, feeds)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
