"""Each op OptimEP claims, on small graphs: OptimEP (CPU fallback disabled) vs ORT's CPU EP,
both kernel ISAs, shapes chosen to hit tile edges (GEMM tiles are 6 rows x 16 columns)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers import ISAS, assert_close, make_model, rand, run_cpu, run_optim

RNG = np.random.default_rng(1234)
CASES: dict[str, tuple] = {}  # id -> (model bytes, feeds, exact)


def case(cid: str, nodes, inputs: dict, outputs, inits=None, opset=17, exact=False, feeds=None):
    model = make_model(nodes, {k: (v.dtype.type, v.shape) for k, v in inputs.items()}, outputs, inits, opset)
    CASES[cid] = (model, feeds or inputs, exact)


N = helper.make_node

# --- Gemm / MatMul -----------------------------------------------------------------------------
# (70, 600, 40): K in three blocks (256, 256, 88) and rows past one chunk of rows whose sums wait between them.
for m, k, n in [(1, 1, 1), (5, 3, 15), (7, 64, 17), (13, 33, 48), (6, 16, 16), (70, 600, 40)]:
    case(f"gemm_bias_transB_{m}x{k}x{n}", [N("Gemm", ["a", "w", "c"], ["y"], transB=1)],
         {"a": rand(RNG, m, k)}, ["y"], {"w": rand(RNG, n, k), "c": rand(RNG, n)})
    case(f"matmul_const_{m}x{k}x{n}", [N("MatMul", ["a", "w"], ["y"])], {"a": rand(RNG, m, k)}, ["y"],
         {"w": rand(RNG, k, n)})
case("gemm_alpha_beta_fullC", [N("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
     {"a": rand(RNG, 9, 10)}, ["y"], {"w": rand(RNG, 10, 20), "c": rand(RNG, 9, 20)})
case("gemm_alpha_beta_fullC_long_k", [N("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
     {"a": rand(RNG, 70, 530)}, ["y"], {"w": rand(RNG, 530, 33), "c": rand(RNG, 70, 33)})
case("gemm_colC", [N("Gemm", ["a", "w", "c"], ["y"])], {"a": rand(RNG, 9, 10)}, ["y"],
     {"w": rand(RNG, 10, 20), "c": rand(RNG, 9, 1)})
case("gemm_transA_noC", [N("Gemm", ["a", "w"], ["y"], transA=1)], {"a": rand(RNG, 10, 7)}, ["y"],
     {"w": rand(RNG, 10, 18)})
case("gemm_runtime_B", [N("Gemm", ["a", "b"], ["y"], transB=1)], {"a": rand(RNG, 4, 5), "b": rand(RNG, 19, 5)}, ["y"])
case("matmul_3d_x_2d", [N("MatMul", ["a", "w"], ["y"])], {"a": rand(RNG, 2, 7, 24)}, ["y"], {"w": rand(RNG, 24, 33)})
case("matmul_batched", [N("MatMul", ["a", "b"], ["y"])], {"a": rand(RNG, 3, 5, 8), "b": rand(RNG, 3, 8, 17)}, ["y"])
case("matmul_broadcast_batch", [N("MatMul", ["a", "b"], ["y"])],
     {"a": rand(RNG, 2, 3, 5, 8), "b": rand(RNG, 3, 8, 4)}, ["y"])
case("matmul_vec_mat", [N("MatMul", ["a", "b"], ["y"])], {"a": rand(RNG, 8), "b": rand(RNG, 8, 5)}, ["y"])
case("matmul_mat_vec", [N("MatMul", ["a", "b"], ["y"])], {"a": rand(RNG, 3, 8), "b": rand(RNG, 8)}, ["y"])

# --- pooling with a window larger than the input (transformers' EfficientNet: AvgPool2d(1280, ceil_mode=True)) ---
case("avgpool_window_past_input", [N("AveragePool", ["x"], ["y"], kernel_shape=[1280, 1280], strides=[1280, 1280],
                                     ceil_mode=1, count_include_pad=1)], {"x": rand(RNG, 2, 8, 7, 7)}, ["y"])
case("maxpool_window_past_input", [N("MaxPool", ["x"], ["y"], kernel_shape=[9, 9], strides=[9, 9], ceil_mode=1)],
     {"x": rand(RNG, 1, 3, 7, 5)}, ["y"], exact=True)

# --- Resize: nearest (each nearest_mode) and linear, each coordinate transformation, scales or sizes ---------
for mode, extra in [("nearest", {}), ("nearest", {"nearest_mode": "floor"}), ("nearest", {"nearest_mode": "ceil"}),
                    ("nearest", {"nearest_mode": "round_prefer_ceil"}), ("linear", {})]:
    for coord in ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]:
        tag = f"resize_{mode}_{extra.get('nearest_mode', 'default')}_{coord}"
        case(f"{tag}_up", [N("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coord, **extra)],
             {"x": rand(RNG, 2, 3, 5, 7)}, ["y"], {"scales": np.array([1, 1, 2, 1.5], np.float32)}, opset=19,
             exact=mode == "nearest")
        case(f"{tag}_down_sizes", [N("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, coordinate_transformation_mode=coord,
                                     **extra)],
             {"x": rand(RNG, 1, 4, 9, 8)}, ["y"], {"sizes": np.array([1, 4, 4, 3], np.int64)}, opset=19,
             exact=mode == "nearest")

# --- element-wise ------------------------------------------------------------------------------
for op in ["Add", "Sub", "Mul", "Div"]:
    for name, sa, sb in [("same", (3, 37), (3, 37)), ("scalar", (4, 9), ()), ("row", (5, 19), (19,)),
                         ("channel", (2, 3, 4, 5), (3, 1, 1)), ("outer", (6, 1), (1, 7)),
                         ("left_scalar", (), (2, 33))]:
        b = rand(RNG, *sb, low=0.5) if op == "Div" else rand(RNG, *sb)
        case(f"{op.lower()}_{name}", [N(op, ["a", "b"], ["y"])], {"a": rand(RNG, *sa), "b": b}, ["y"], exact=op != "Div")
    case(f"{op.lower()}_const_operand", [N(op, ["a", "c"], ["y"])], {"a": rand(RNG, 2, 8, 3)}, ["y"],
         {"c": rand(RNG, 8, 1, low=0.5)}, exact=op != "Div")

UNARY = {"Relu": None, "Sigmoid": None, "Tanh": None, "Erf": None, "Sqrt": 0.01, "Exp": None, "Neg": None, "Abs": None}
for op, low in UNARY.items():
    x = rand(RNG, 3, 41, low=low)
    case(f"{op.lower()}", [N(op, ["x"], ["y"])], {"x": x}, ["y"], exact=op in ("Relu", "Neg", "Abs"))
case("gelu", [N("Gelu", ["x"], ["y"])], {"x": rand(RNG, 4, 33)}, ["y"], opset=20)
case("gelu_tanh", [N("Gelu", ["x"], ["y"], approximate="tanh")], {"x": rand(RNG, 4, 33)}, ["y"], opset=20)
# Activations with parameters: defaults, MobileNetV3's 1/6 and 1/2, and x * HardSigmoid(x) (what ONNX's
# HardSwish function inlines to), which OptimEP folds into one HardSwish step.
case("hardsigmoid", [N("HardSigmoid", ["x"], ["y"])], {"x": rand(RNG, 3, 41) * 4}, ["y"])
case("hardsigmoid_sixth", [N("HardSigmoid", ["x"], ["y"], alpha=1 / 6, beta=0.5)], {"x": rand(RNG, 3, 41) * 4}, ["y"])
case("hardswish", [N("HardSwish", ["x"], ["y"])], {"x": rand(RNG, 3, 41) * 4}, ["y"], opset=14)
case("x_times_hardsigmoid", [N("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5), N("Mul", ["x", "h"], ["y"])],
     {"x": rand(RNG, 3, 41) * 4}, ["y"])
case("leakyrelu", [N("LeakyRelu", ["x"], ["y"], alpha=0.1)], {"x": rand(RNG, 3, 41)}, ["y"], exact=True)
case("leakyrelu_default", [N("LeakyRelu", ["x"], ["y"])], {"x": rand(RNG, 3, 41)}, ["y"], exact=True)
case("clip", [N("Clip", ["x", "lo", "hi"], ["y"])], {"x": rand(RNG, 5, 21)}, ["y"],
     {"lo": np.float32(-0.5), "hi": np.float32(0.7)}, exact=True)
case("clip_min_only", [N("Clip", ["x", "lo"], ["y"])], {"x": rand(RNG, 5, 21)}, ["y"], {"lo": np.float32(0.0)}, exact=True)
case("relu_nan_inf", [N("Relu", ["x"], ["y"])], {"x": np.array([[np.nan, -np.inf, np.inf, -1, 0, 2, 3, -4, 5, np.nan]],
                                                           dtype=np.float32)}, ["y"], exact=True)

# --- Conv / pooling / normalization -------------------------------------------------------------
def conv(cid, x, w, b=None, relu=False, **attrs):
    inits = {"w": w} | ({"b": b} if b is not None else {})
    nodes = [N("Conv", ["x", "w"] + (["b"] if b is not None else []), ["c" if relu else "y"], **attrs)]
    if relu:
        nodes.append(N("Relu", ["c"], ["y"]))
    case(cid, nodes, {"x": x}, ["y"], inits)


conv("conv3x3_pad1", rand(RNG, 1, 3, 9, 11), rand(RNG, 8, 3, 3, 3), rand(RNG, 8), pads=[1, 1, 1, 1])
conv("conv3x3_stride2_batch2", rand(RNG, 2, 4, 10, 10), rand(RNG, 5, 4, 3, 3), rand(RNG, 5), strides=[2, 2], pads=[1, 1, 1, 1])
conv("conv_dilated", rand(RNG, 1, 2, 12, 12), rand(RNG, 3, 2, 3, 3), dilations=[2, 2])
conv("conv_groups2", rand(RNG, 1, 4, 7, 7), rand(RNG, 6, 2, 3, 3), rand(RNG, 6), group=2, pads=[1, 1, 1, 1])
conv("conv_depthwise", rand(RNG, 2, 6, 8, 8), rand(RNG, 6, 1, 3, 3), rand(RNG, 6), group=6, pads=[1, 1, 1, 1])
conv("conv1x1", rand(RNG, 1, 16, 5, 5), rand(RNG, 17, 16, 1, 1), rand(RNG, 17))
conv("conv_same_upper", rand(RNG, 1, 3, 8, 7), rand(RNG, 4, 3, 4, 4), auto_pad="SAME_UPPER", strides=[2, 2])
conv("conv_asym_pads", rand(RNG, 1, 3, 6, 6), rand(RNG, 4, 3, 3, 2), pads=[0, 1, 2, 0])
conv("conv1d", rand(RNG, 2, 3, 20), rand(RNG, 5, 3, 3), rand(RNG, 5), pads=[1, 1], strides=[2])
conv("conv_relu_fused", rand(RNG, 1, 3, 9, 9), rand(RNG, 8, 3, 3, 3), rand(RNG, 8), relu=True, pads=[1, 1, 1, 1])

case("maxpool2x2", [N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"x": rand(RNG, 1, 3, 8, 9)}, ["y"], exact=True)
case("maxpool3x3_s2_pad1", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
     {"x": rand(RNG, 2, 3, 9, 9)}, ["y"], exact=True)
case("maxpool_ceil", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
     {"x": rand(RNG, 1, 2, 8, 8)}, ["y"], exact=True)
case("avgpool_exclude_pad", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
     {"x": rand(RNG, 1, 2, 6, 7)}, ["y"])
case("avgpool_include_pad", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)],
     {"x": rand(RNG, 1, 2, 6, 7)}, ["y"])
case("global_avgpool", [N("GlobalAveragePool", ["x"], ["y"])], {"x": rand(RNG, 2, 5, 7, 6)}, ["y"])
case("global_maxpool", [N("GlobalMaxPool", ["x"], ["y"])], {"x": rand(RNG, 2, 5, 7, 6)}, ["y"], exact=True)
case("batchnorm", [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)], {"x": rand(RNG, 2, 4, 5, 3)}, ["y"],
     {"s": rand(RNG, 4), "b": rand(RNG, 4), "m": rand(RNG, 4), "v": rand(RNG, 4, low=0.1)})
case("layernorm_last", [N("LayerNormalization", ["x", "s", "b"], ["y"])], {"x": rand(RNG, 2, 5, 24)}, ["y"],
     {"s": rand(RNG, 24), "b": rand(RNG, 24)})
case("layernorm_axis1_nobias", [N("LayerNormalization", ["x", "s"], ["y"], axis=1, epsilon=1e-3)], {"x": rand(RNG, 3, 4, 6)}, ["y"],
     {"s": rand(RNG, 4, 6)})
case("softmax_last", [N("Softmax", ["x"], ["y"])], {"x": rand(RNG, 3, 4, 19)}, ["y"], opset=13)
case("softmax_axis1", [N("Softmax", ["x"], ["y"], axis=1)], {"x": rand(RNG, 3, 4, 5)}, ["y"], opset=13)
# Attention-sized rows (197: ViT) with masked scores (-1e30, as a padding mask adds), and rows shorter than a vector.
case("softmax_masked_rows", [N("Softmax", ["x"], ["y"])],
     {"x": np.where(RNG.random((2, 3, 197)) < 0.3, np.float32(-1e30), rand(RNG, 2, 3, 197) * 8).astype(np.float32)}, ["y"], opset=13)
case("softmax_short_rows", [N("Softmax", ["x"], ["y"])], {"x": rand(RNG, 5, 3) * 20}, ["y"], opset=13)
case("softmax_opset11_flatten", [N("Softmax", ["x"], ["y"], axis=1)], {"x": rand(RNG, 3, 4, 5)}, ["y"], opset=11)

# --- data movement ------------------------------------------------------------------------------
case("flatten", [N("Flatten", ["x"], ["y"], axis=2)], {"x": rand(RNG, 2, 3, 4, 5)}, ["y"], exact=True)
case("reshape_zero_minus1", [N("Reshape", ["x", "s"], ["y"])], {"x": rand(RNG, 2, 3, 4)}, ["y"],
     {"s": np.array([0, -1], dtype=np.int64)}, exact=True)
case("transpose_0213", [N("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])], {"x": rand(RNG, 2, 3, 4, 5)}, ["y"], exact=True)
# Three channels going last and back: the few-rows / few-columns path, 4-byte and 1-byte elements.
case("transpose_rgb_last", [N("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], {"x": rand(RNG, 2, 3, 33, 41)}, ["y"], exact=True)
case("transpose_rgb_first", [N("Transpose", ["x"], ["y"], perm=[0, 3, 1, 2])], {"x": rand(RNG, 2, 33, 41, 3)}, ["y"], exact=True)
for _few in (2, 4):
    case(f"transpose_u8_{_few}_last", [N("Transpose", ["x"], ["y"], perm=[0, 2, 1])],
         {"x": RNG.integers(0, 256, (3, _few, 70000), dtype=np.uint8)}, ["y"], exact=True)
    case(f"transpose_u8_{_few}_first", [N("Transpose", ["x"], ["y"], perm=[0, 2, 1])],
         {"x": RNG.integers(0, 256, (3, 70000, _few), dtype=np.uint8)}, ["y"], exact=True)
case("transpose_many_small", [N("Transpose", ["x"], ["y"], perm=[0, 2, 1])], {"x": rand(RNG, 5000, 3, 7)}, ["y"], exact=True)
case("transpose_default", [N("Transpose", ["x"], ["y"])], {"x": rand(RNG, 3, 4, 5)}, ["y"], exact=True)
case("squeeze_unsqueeze", [N("Unsqueeze", ["x", "a"], ["u"]), N("Squeeze", ["u", "a"], ["y"])], {"x": rand(RNG, 3, 4)}, ["y"],
     {"a": np.array([0, 3], dtype=np.int64)}, exact=True)
case("identity", [N("Identity", ["x"], ["y"])], {"x": rand(RNG, 3, 4)}, ["y"], exact=True)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(CASES))
def test_op_matches_cpu_ep(cid, isa):
    model, feeds, exact = CASES[cid]
    ref = run_cpu(model, feeds)
    ours = run_optim(model, feeds, isa=isa)
    for i, (o, r) in enumerate(zip(ours, ref)):
        if exact:
            assert_close(o, r, atol=0, rtol=0, what=f"{cid} output {i}")
        else:
            assert_close(o, r, what=f"{cid} output {i}")


def test_scalar_and_avx2_agree_on_a_large_gemm():
    """The two SGEMM kernels on the same packed operands: same sums in a different order."""
    a, w = rand(RNG, 67, 300), rand(RNG, 300, 129)
    model = make_model([N("MatMul", ["a", "w"], ["y"])], {"a": (np.float32, a.shape)}, ["y"], {"w": w})
    (s,) = run_optim(model, {"a": a}, isa="scalar")
    (v,) = run_optim(model, {"a": a}, isa="avx2")
    assert_close(v, s, what="avx2 vs scalar")
    assert_close(v, (a.astype(np.float64) @ w).astype(np.float32), atol=1e-3, rtol=1e-4, what="avx2 vs float64")


@pytest.mark.skipif("avx512" not in ISAS, reason="the CPU lacks AVX-512")
def test_avx2_and_avx512_gemms_sum_in_the_same_order():
    """Both vector SGEMMs run each output as one chain of FMAs in k order, across their blocks of K (three here)
    and chunks of rows: bit-identical results."""
    a, w = rand(RNG, 77, 700), rand(RNG, 700, 72)
    model = make_model([N("MatMul", ["a", "w"], ["y"])], {"a": (np.float32, a.shape)}, ["y"], {"w": w})
    (v2,) = run_optim(model, {"a": a}, isa="avx2")
    (v5,) = run_optim(model, {"a": a}, isa="avx512")
    assert_close(v5, v2, atol=0, rtol=0, what="avx512 vs avx2")
