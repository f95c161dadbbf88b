"""com.microsoft MatMulNBits (weight-only int4 / int8 blocks, ops/matmul_nbits.cc) on OptimEP against ONNX Runtime's
CPU EP, which runs the same contrib op: 4 and 8 bits, block sizes 16 to 128, K not a multiple of the block, no zero
points / uint8 packed / float zero points, a bias, A of rank 2 and 3, M from 1 (decode, codes unpacked in the
kernel) to 37 rows (16 and more: a prefill, column groups dequantized for the float GEMM); every kernel set this
machine has (the scalar one is the reference the vector kernels follow)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, run_cpu, step_kernels
from optim.ep_plugin import placement, session

RNG = np.random.default_rng(47)
# Float sums in another order than MLAS's (which may also round A to int8 blocks): relative to the output's scale.
NBITS_RTOL = 2e-5


def quantize_blocks(w: np.ndarray, bits: int, block: int, zeros: str):
    """W [K, N] as MatMulNBits stores it: codes [N, blocks, block * bits / 8] (low bits first along K), scales
    [N, blocks], and zero points (None for the default 2^(bits-1), else uint8 packed or float32)."""
    k, n = w.shape
    blocks = (k + block - 1) // block
    padded = np.zeros((blocks * block, n), np.float32)
    padded[:k] = w
    wb = padded.T.reshape(n, blocks, block)
    top = (1 << bits) - 1
    if zeros == "none":
        scale = np.abs(wb).max(-1) / (1 << (bits - 1)) + 1e-8
        zero = np.full((n, blocks), 1 << (bits - 1), np.int32)
    else:
        lo, hi = np.minimum(wb.min(-1), 0), np.maximum(wb.max(-1), 0)
        scale = (hi - lo) / top + 1e-8
        zero = np.clip(np.round(-lo / scale), 0, top).astype(np.int32)
    codes = np.clip(np.round(wb / scale[..., None]) + zero[..., None], 0, top).astype(np.uint8)
    if bits == 4:
        codes = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    zp = None
    if zeros == "uint8":
        zp = zero.astype(np.uint8)
        if bits == 4:
            if blocks % 2:
                zp = np.concatenate([zp, np.zeros((n, 1), np.uint8)], axis=1)
            zp = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8)
    elif zeros == "float":
        zp = zero.astype(np.float32)
    return codes, scale.astype(np.float32), zp


def nbits_model(k: int, n: int, bits: int, block: int, zeros: str, bias: bool, a_shape) -> bytes:
    w = RNG.standard_normal((k, n)).astype(np.float32)
    codes, scales, zp = quantize_blocks(w, bits, block, zeros)
    inits = [numpy_helper.from_array(codes, "B"), numpy_helper.from_array(scales, "scales")]
    inputs = ["a", "B", "scales", "", "", ""]
    if zp is not None:
        inits.append(numpy_helper.from_array(zp, "zp"))
        inputs[3] = "zp"
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(n).astype(np.float32), "bias"))
        inputs[5] = "bias"
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("MatMulNBits", inputs, ["y"], name="mm", domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, ir_version=IR_VERSION,
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


CASES = [  # (K, N, bits, block, zero points, bias, A's shape)
    (64, 40, 4, 32, "none", False, [1, 64]),
    (64, 40, 4, 16, "uint8", True, [3, 64]),
    (100, 24, 4, 32, "uint8", False, [2, 5, 100]),  # K tail: 100 = 3 blocks of 32 + 4
    (96, 33, 4, 64, "float", True, [37, 96]),
    (128, 48, 8, 32, "none", True, [1, 1, 128]),
    (72, 20, 8, 16, "uint8", False, [6, 72]),
    (256, 64, 4, 128, "uint8", True, [4, 256]),
    (64, 70, 8, 32, "uint8", True, [2, 9, 64]),  # 18 rows: a prefill, dequantized to float panels
    (50, 16, 4, 16, "none", False, [16, 50]),
    (40, 17, 4, 128, "float", False, [9, 40]),  # one block longer than K
    (40, 17, 8, 128, "float", False, [9, 40]),  # the CPU EP cannot run 8 bits with float zero points: numpy does
]


def dequantized_reference(model: bytes, a: np.ndarray) -> np.ndarray:
    """A x dequantize(B)^T (+ bias) in float64 from the model's own initializers."""
    m = onnx.load_from_string(model)
    node = m.graph.node[0]
    att = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    k, n, bits, block = att["K"], att["N"], att["bits"], att["block_size"]
    codes = inits["B"].reshape(n, -1)
    if bits == 4:
        codes = np.stack([codes & 15, codes >> 4], -1).reshape(n, -1)
    blocks = codes.shape[1] // block
    zp = np.full((n, blocks), 1 << (bits - 1), np.float64)
    if len(node.input) > 3 and node.input[3]:
        z = inits[node.input[3]]
        if z.dtype == np.uint8 and bits == 4:
            z = np.stack([z & 15, z >> 4], -1).reshape(n, -1)
        zp = z[:, :blocks].astype(np.float64)
    w = (codes.reshape(n, blocks, block) - zp[..., None]) * inits["scales"].reshape(n, blocks)[..., None]
    y = a.astype(np.float64) @ w.reshape(n, -1)[:, :k].T
    if len(node.input) > 5 and node.input[5]:
        y += inits[node.input[5]]
    return y


@pytest.mark.parametrize("k, n, bits, block, zeros, bias, a_shape", CASES)
def test_matmul_nbits_matches_the_cpu_ep_on_every_isa(k, n, bits, block, zeros, bias, a_shape):
    model = nbits_model(k, n, bits, block, zeros, bias, a_shape)
    feeds = {"a": RNG.standard_normal(a_shape).astype(np.float32)}
    ref = dequantized_reference(model, feeds["a"]) if bits == 8 and zeros == "float" else run_cpu(model, feeds)[0]
    assert ref.shape == (*a_shape[:-1], n)
    scale = float(np.abs(ref).max())
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        got = sess.run(None, feeds)[0]
        assert got.shape == ref.shape
        err = float(np.abs(got - ref).max())
        assert err <= NBITS_RTOL * scale, f"{isa}: max abs error {err:.3g} against outputs up to {scale:.3g}"


def test_the_kernel_unpacks_codes_exactly_for_integer_inputs():
    """Small integer A, scale 1 and zero 8: every product and sum is exact in float32, so OptimEP's result equals
    the integer reference bit for bit on every ISA."""
    k, n, block = 48, 12, 16
    codes = RNG.integers(0, 16, (n, k)).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).reshape(n, k // block, block // 2).astype(np.uint8)
    a = RNG.integers(-3, 4, (5, k)).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["a", "B", "scales"], ["y"], domain="com.microsoft", K=k, N=n, bits=4,
                            block_size=block)
    graph = helper.make_graph([node], "exact", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(packed, "B"),
                               numpy_helper.from_array(np.ones((n, k // block), np.float32), "scales")])
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17),
                                                                            helper.make_opsetid("com.microsoft", 1)])
    want = a.astype(np.int64) @ (codes.astype(np.int64) - 8).T
    for isa in ISAS:
        got = session(model.SerializeToString(), fallback=False, isa=isa).run(None, {"a": a})[0]
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=isa)


def test_what_optimep_refuses_it_says():
    """B fed at run time (not a constant): the CPU EP runs the node and the placement report says why."""
    model = onnx.load_from_string(nbits_model(64, 8, 4, 32, "none", False, [1, 64]))
    b = next(t for t in model.graph.initializer if t.name == "B")
    model.graph.initializer.remove(b)
    model.graph.input.append(helper.make_tensor_value_info("B", TensorProto.UINT8, list(b.dims)))
    sess = session(model.SerializeToString())
    reasons = [n.reason for n in placement(sess).fallback]
    assert reasons == ["input 'B' is not a constant initializer"], reasons


# accuracy_level 4: A quantized to int8 per block (both runtimes do it, each its own way of rounding and summing):
# relative to the output's scale.
Q8_RTOL = 2e-3
Q8_FLOAT_RTOL = 2e-2  # int8 activations against float ones
Q8_CASES = [  # (K, N, block, zero points, bias, A's shape)
    (64, 40, 32, "none", False, [1, 64]),
    (128, 48, 64, "uint8", True, [3, 128]),
    (100, 24, 32, "uint8", False, [2, 5, 100]),  # K tail: the last block's padding codes meet zero activations
    (256, 20, 128, "float", True, [1, 1, 256]),
    (96, 22, 32, "uint8", True, [7, 96]),  # N tail in the packed groups of 4 columns; rows by 4, 2 and 1
    (64, 30, 32, "uint8", True, [20, 64]),  # a prefill's rows, four at a time
]


@pytest.mark.parametrize("k, n, block, zeros, bias, a_shape", Q8_CASES)
def test_int8_activations_match_the_cpu_ep_and_agree_across_isas(k, n, block, zeros, bias, a_shape):
    model = onnx.load_from_string(nbits_model(k, n, 4, block, zeros, bias, a_shape))
    model.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", 4))
    model = model.SerializeToString()
    feeds = {"a": RNG.standard_normal(a_shape).astype(np.float32)}
    exact = dequantized_reference(model, feeds["a"])  # float activations: what int8 ones approximate
    scale = float(np.abs(exact).max())
    # Against the CPU EP's int8 activations where it runs the case (not with float zero points), else against float
    # activations within the error int8 ones make (the CPU EP's own, measured here, is under it).
    ref, rtol = (run_cpu(model, feeds)[0], Q8_RTOL) if zeros != "float" else (exact, Q8_FLOAT_RTOL)
    assert float(np.abs(ref - exact).max()) <= Q8_FLOAT_RTOL * scale
    by_isa = {}
    for isa in ISAS:
        kernels = step_kernels(model, isa)
        assert len(kernels) == 1 and kernels[0].startswith("matmul_nbits_q8_"), kernels
        by_isa[isa] = session(model, fallback=False, isa=isa).run(None, feeds)[0]
        err = float(np.abs(by_isa[isa] - ref).max())
        assert err <= rtol * scale, f"{isa} ({kernels[0]}): max abs error {err:.3g} against outputs up to {scale:.3g}"
    for isa, got in by_isa.items():  # the integer sums are exact: only float summation order differs
        np.testing.assert_allclose(got, by_isa["scalar"], rtol=0, atol=1e-5 * scale, err_msg=isa)


def test_fractional_float_zero_points_keep_activations_float():
    """int8 activations need whole-number zero points (bytes in the packed layout): a fractional one keeps the node
    on the float-activation kernel, exact to the float reference."""
    model = onnx.load_from_string(nbits_model(64, 12, 4, 32, "float", False, [1, 64]))
    model.graph.node[0].attribute.append(helper.make_attribute("accuracy_level", 4))
    zp = next(t for t in model.graph.initializer if t.name == "zp")
    zp.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(zp) + np.float32(0.5), "zp"))
    model = model.SerializeToString()
    a = RNG.standard_normal([1, 64]).astype(np.float32)
    want = dequantized_reference(model, a)
    for isa in ISAS:
        kernels = step_kernels(model, isa)
        assert len(kernels) == 1 and kernels[0].startswith("matmul_nbits_f32_"), kernels
        got = session(model, fallback=False, isa=isa).run(None, {"a": a})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=NBITS_RTOL * float(np.abs(want).max()), err_msg=isa)


def _siblings_model(parts, k: int, a_shape) -> bytes:
    """MatMulNBits nodes reading one A (int8 activations, blocks of 32), one output each: parts = (N, zero points,
    bias) per node."""
    nodes, inits, outputs = [], [], []
    for i, (n, zeros, bias) in enumerate(parts):
        one = onnx.load_from_string(nbits_model(k, n, 4, 32, zeros, bias, a_shape))
        node = one.graph.node[0]
        node.attribute.append(helper.make_attribute("accuracy_level", 4))
        rename = {t.name: f"{t.name}{i}" for t in one.graph.initializer}
        for t in one.graph.initializer:
            t.name = rename[t.name]
        node.input[:] = [rename.get(x, x) for x in node.input]
        node.output[:] = [f"y{i}"]
        node.name = f"mm{i}"
        nodes.append(node)
        inits += list(one.graph.initializer)
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    if len(parts) > 1:  # something reading them all, so that they meet in one partition (as in a model)
        nodes.append(helper.make_node("Concat", [f"y{i}" for i in range(len(parts))], ["all"], axis=-1))
        outputs.append(helper.make_tensor_value_info("all", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "siblings", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape)],
                              outputs, inits)
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17),
                             helper.make_opsetid("com.microsoft", 1)]).SerializeToString()


def _one_of(model: bytes, i: int) -> bytes:
    """Node i of a _siblings_model alone, with its own initializers."""
    m = onnx.load_from_string(model)
    node = m.graph.node[i]
    inits = [t for t in m.graph.initializer if t.name in node.input]
    graph = helper.make_graph([node], "one", list(m.graph.input),
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=list(m.opset_import)).SerializeToString()


@pytest.mark.parametrize("a_shape", [[1, 96], [5, 96]])
def test_projections_of_one_input_run_as_one_step_with_the_same_results(a_shape):
    """A layer's q / k / v projections (one A, int8 activations) become one MatMulNBitsGroup step: A quantized once,
    every part's columns in one round of tasks; each output the same bytes as its node alone, on every kernel set."""
    parts = [(40, "uint8", True), (22, "uint8", False), (8, "none", True)]  # 22: a column tail in the packed groups
    model = _siblings_model(parts, 96, a_shape)
    feeds = {"a": RNG.standard_normal(a_shape).astype(np.float32)}
    ref = run_cpu(model, feeds)
    for isa in ISAS:
        sess = session(model, fallback=False, isa=isa)
        assert placement(sess).rewrites.get("matmul_nbits_siblings") == 1, placement(sess).rewrites
        got = sess.run(None, feeds)
        for i in range(len(parts)):
            alone = session(_one_of(model, i), fallback=False, isa=isa).run(None, feeds)[0]
            np.testing.assert_array_equal(got[i], alone, err_msg=f"part {i} on {isa}")
            scale = float(np.abs(ref[i]).max())
            assert float(np.abs(got[i] - ref[i]).max()) <= Q8_RTOL * scale, f"part {i} on {isa}"
