"""EP option precision=bf16: float MatMul / Gemm with constant weights and convolutions run on the bf16 GEMM
(kernel_table.h, sgemm_bf16): inputs rounded to bfloat16 (nearest even), float32 sums that take each K pair's odd
product, then its even one. The scalar reference (isa=scalar, any CPU) must equal a numpy model of exactly that;
the hardware kernels (AVX512-BF16's vdpbf16ps, which Intel defines in that order, and AMX tiles, which sum in
their own) within float32 rounding of it (HW_SUM_REL_TO_MAX: another CPU's vdpbf16ps may round the pair once);
all within a named tolerance of float32; CPUs without a bf16 GEMM are refused in one sentence; fp32 stays the
default."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, make_model, run_cpu, run_optim, step_kernels
from optim.ep_plugin import OptimEPError, placement, session
from optim.ep_plugin.tools.doctor import bf16_kernel

N = helper.make_node
# bf16 keeps 8 significant bits: each rounded input is off by at most 2^-9 relative, so a K-term dot product of
# unit-scale random values is off by about 2^-9 * sqrt(K) of its typical size; 1% of the output's largest
# magnitude bounds that for the K of these tests (up to 300) with a wide margin.
BF16_REL_TO_MAX = 1e-2
# The same bf16 products summed in another order or with fewer roundings (AMX, other vdpbf16ps designs): a few
# float32 roundings of the sums apart.
HW_SUM_REL_TO_MAX = 1e-5
BF16_ISAS = [isa for isa in ISAS if isa != "scalar" and bf16_kernel(isa)]


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return rounded.view(np.float32)


def bf16_gemm(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The bf16 GEMM's sums: bf16(a) x bf16(w), per K pair the odd product added first, in float32."""
    a, w = bf16(a), bf16(w)
    k = a.shape[1]
    if k % 2:
        a, w = np.pad(a, ((0, 0), (0, 1))), np.pad(w, ((0, 1), (0, 0)))
    acc = np.zeros((a.shape[0], w.shape[1]), np.float32)
    for q in range(0, a.shape[1], 2):
        acc = (acc + np.outer(a[:, q + 1], w[q + 1])).astype(np.float32)
        acc = (acc + np.outer(a[:, q], w[q])).astype(np.float32)
    return acc


def _matmul_bias(m: int, k: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    model = make_model([N("MatMul", ["x", "w"], ["mm"]), N("Add", ["mm", "b"], ["y"])], {"x": (np.float32, ["m", k])},
                       ["y"], {"w": w, "b": b})
    return model, rng.standard_normal((m, k)).astype(np.float32), w, b


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 2, 16), (9, 31, 33), (37, 150, 70), (130, 300, 96)])
def test_the_scalar_reference_is_the_bf16_gemm_exactly(m, k, n):
    """Rows around the 8-row tiles, odd K (a zero-padded last pair), columns around the 16-wide panels."""
    model, x, w, b = _matmul_bias(m, k, n, seed=m + k + n)
    got = run_optim(model, {"x": x}, isa="scalar", precision="bf16")[0]
    np.testing.assert_array_equal(got, (bf16_gemm(x, w) + b).astype(np.float32))


@pytest.mark.parametrize("isa", BF16_ISAS)
@pytest.mark.parametrize("m, k, n", [(1, 3, 5), (8, 64, 32), (13, 513, 40), (130, 300, 96)])
def test_every_bf16_kernel_equals_the_reference_within_float32_rounding(isa, m, k, n):
    """Rows around the 8- and 32-row tiles, K past a 32-value tile step (513), ragged last panels."""
    model, x, _, _ = _matmul_bias(m, k, n, seed=3 * m + k)
    want = run_optim(model, {"x": x}, isa="scalar", precision="bf16")[0]
    got = run_optim(model, {"x": x}, isa=isa, precision="bf16")[0]
    assert np.abs(got - want).max() <= HW_SUM_REL_TO_MAX * np.abs(want).max()


def test_bf16_stays_within_its_tolerance_of_float32_and_fp32_is_the_default():
    model, x, _, _ = _matmul_bias(64, 300, 96, seed=5)
    ref = run_cpu(model, {"x": x})[0]
    got = run_optim(model, {"x": x}, isa="scalar", precision="bf16")[0]
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 0 < err <= BF16_REL_TO_MAX, err  # not float32 (err > 0), and not worse than bf16 rounding explains
    assert step_kernels(model, "scalar") == []  # fp32 by default: no bf16 GEMM step
    assert np.abs(run_optim(model, {"x": x}, isa="scalar")[0] - ref).max() / np.abs(ref).max() < 1e-5


def test_gemm_with_transposed_weights_and_a_folded_gelu_run_in_bf16():
    rng = np.random.default_rng(9)
    w, c = rng.standard_normal((40, 24)).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    gemm = make_model([N("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5)], {"x": (np.float32, [5, 24])}, ["y"],
                      {"w": w, "c": c})
    x = rng.standard_normal((5, 24)).astype(np.float32)
    np.testing.assert_array_equal(run_optim(gemm, {"x": x}, isa="scalar", precision="bf16")[0],
                                  (0.5 * bf16_gemm(x, w.T) + c).astype(np.float32))
    w2, b2 = rng.standard_normal((24, 48)).astype(np.float32), rng.standard_normal(48).astype(np.float32)
    gelu = make_model([N("MatMul", ["x", "w"], ["mm"]), N("Add", ["mm", "b"], ["s"]), N("Gelu", ["s"], ["y"], domain="")],
                      {"x": (np.float32, [5, 24])}, ["y"], {"w": w2, "b": b2}, opset=20)
    ref = run_cpu(gelu, {"x": x})[0]
    for isa in ["scalar", *BF16_ISAS]:
        got = run_optim(gelu, {"x": x}, isa=isa, precision="bf16")[0]
        assert np.abs(got - ref).max() / np.abs(ref).max() <= BF16_REL_TO_MAX
        assert step_kernels(gelu, isa, precision="bf16") == [bf16_kernel(isa)], isa  # the one MatMul + Gelu step


def test_the_profile_names_the_bf16_gemm_only_with_precision_bf16():
    model, _, _, _ = _matmul_bias(8, 64, 32, seed=1)
    assert step_kernels(model, "scalar") == []
    assert step_kernels(model, "scalar", precision="bf16") == ["sgemm_bf16_scalar"]


@pytest.mark.parametrize("isa", [isa for isa in ISAS if isa != "scalar" and not bf16_kernel(isa)])
def test_a_cpu_without_a_bf16_gemm_is_refused_in_one_sentence(isa):
    model, _, _, _ = _matmul_bias(4, 8, 8, seed=2)
    with pytest.raises(OptimEPError, match=f"precision=bf16 needs a CPU with AVX512-BF16 .* isa={isa} has no bf16 GEMM"):
        session(model, isa=isa, precision="bf16")


def test_an_unknown_precision_is_refused():
    model, _, _, _ = _matmul_bias(4, 8, 8, seed=2)
    with pytest.raises(OptimEPError, match="option precision='fp16' is not fp32 or bf16"):
        session(model, precision="fp16")


# --- convolutions (ops/conv_bf16.cc): windows gathered into bf16 rows, the same GEMM ----------------------------

def _conv_model(cin: int, cout: int, k: int, stride: int, residual: bool, seed: int):
    """x -> Conv(k x k, pad k // 2, stride) + bias [-> Add(r)] -> Relu, NCHW 2 x cin x 9 x 11."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    nodes = [N("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4, strides=[stride, stride])]
    inputs = {"x": (np.float32, [2, cin, 9, 11])}
    oh, ow = (9 + 2 * (k // 2) - k) // stride + 1, (11 + 2 * (k // 2) - k) // stride + 1
    if residual:
        nodes.append(N("Add", ["c", "r"], ["s"]))
        inputs["r"] = (np.float32, [2, cout, oh, ow])
    nodes.append(N("Relu", ["s" if residual else "c"], ["y"]))
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, (_, shape) in inputs.items()}
    return make_model(nodes, inputs, ["y"], {"w": w, "b": b}), feeds, w, b


def _conv_emulated(x, w, b, r, stride):
    """The bf16 convolution in numpy: im2col rows in (ky, kx, channel) order, bf16_gemm, bias, then the Add of a graph
    input (not folded into the convolution: test_a_residual_... covers the folded one), Relu."""
    n, cin, h, wd = x.shape
    cout, _, k, _ = w.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // stride + 1, (wd + 2 * p - k) // stride + 1
    cols = np.stack([xp[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
                     for ky in range(k) for kx in range(k)], axis=1)  # n, taps, cin, oh, ow
    a = cols.transpose(0, 3, 4, 1, 2).reshape(n * oh * ow, k * k * cin)
    wb = w.transpose(2, 3, 1, 0).reshape(k * k * cin, cout)
    y = (bf16_gemm(a, wb) + b).astype(np.float32)
    if r is not None:
        y = (y + r.transpose(0, 2, 3, 1).reshape(-1, cout)).astype(np.float32)
    return np.maximum(y, 0).reshape(n, oh, ow, cout).transpose(0, 3, 1, 2)


CONV_CASES = {"1x1": (64, 40, 1, 1, False), "1x1 odd channels, residual": (5, 24, 1, 1, True),
              "3x3": (16, 48, 3, 1, False), "3x3 stride 2, residual": (7, 33, 3, 2, True), "5x5": (6, 16, 5, 1, False)}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_a_convolution_in_bf16_is_the_bf16_gemm_of_its_windows(case):
    """The scalar reference equals the numpy model, the hardware kernels within float32 rounding of it, all within
    bf16's tolerance of float32. The step profile names the bf16 GEMM (Winograd is off in bf16)."""
    cin, cout, k, stride, residual = CONV_CASES[case]
    model, feeds, w, b = _conv_model(cin, cout, k, stride, residual, seed=cin + cout)
    want = _conv_emulated(feeds["x"], w, b, feeds.get("r"), stride)
    np.testing.assert_array_equal(run_optim(model, feeds, isa="scalar", precision="bf16")[0], want)
    ref = run_cpu(model, feeds)[0]
    for isa in BF16_ISAS:
        got = run_optim(model, feeds, isa=isa, precision="bf16")[0]
        assert np.abs(got - want).max() <= HW_SUM_REL_TO_MAX * np.abs(want).max(), isa
        assert np.abs(got - ref).max() <= BF16_REL_TO_MAX * np.abs(ref).max(), isa
        assert bf16_kernel(isa) in step_kernels(model, isa, precision="bf16"), isa


def test_a_stem_reading_the_channels_first_image_stays_float32():
    """A convolution of up to 4 input channels at a partition's input reads the NCHW image itself
    (rewrites/nchw_stem.cc): not in bf16 yet, so it names no bf16 GEMM and keeps float32's results."""
    model, feeds, _, _ = _conv_model(3, 16, 5, 1, False, seed=1)
    assert step_kernels(model, "scalar", precision="bf16") == []
    ref = run_cpu(model, feeds)[0]
    assert np.abs(run_optim(model, feeds, isa="scalar", precision="bf16")[0] - ref).max() <= 1e-5 * np.abs(ref).max()


def test_a_residual_folded_into_the_convolution_may_share_its_output_buffer():
    """A ResNet block: t = Relu(Conv1x1(x)), u = Relu(Conv3x3(t)), y = Relu(Conv1x1(u) + t). The last convolution
    takes the Add in (its residual t, whose last reader it is) and its output may take over t's buffer
    (Op::in_place_input): the bf16 path must read the residual before the GEMM overwrites it. Every ISA within
    bf16's tolerance of float32, the Add folded into the step."""
    rng = np.random.default_rng(4)
    w1 = (rng.standard_normal((32, 16, 1, 1)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((32, 32, 3, 3)) / 17).astype(np.float32)
    w3 = (rng.standard_normal((32, 32, 1, 1)) / 6).astype(np.float32)
    model = make_model([N("Conv", ["x", "w1"], ["c1"]), N("Relu", ["c1"], ["t"]),
                        N("Conv", ["t", "w2"], ["c2"], pads=[1, 1, 1, 1]), N("Relu", ["c2"], ["u"]),
                        N("Conv", ["u", "w3"], ["c3"]), N("Add", ["c3", "t"], ["s"]), N("Relu", ["s"], ["y"])],
                       {"x": (np.float32, [2, 16, 12, 10])}, ["y"], {"w1": w1, "w2": w2, "w3": w3})
    feeds = {"x": rng.standard_normal((2, 16, 12, 10)).astype(np.float32)}
    ref = run_cpu(model, feeds)[0]
    for isa in ["scalar", *BF16_ISAS]:
        sess = session(model, fallback=False, isa=isa, precision="bf16")
        assert any("Add" in label for labels in placement(sess).compiled.values() for label in labels
                   if label.startswith("NhwcConv")), placement(sess).compiled
        got = sess.run(None, feeds)[0]
        assert np.abs(got - ref).max() <= BF16_REL_TO_MAX * np.abs(ref).max(), isa
