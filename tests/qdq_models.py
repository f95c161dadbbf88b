"""QDQ integer units and their exact replicas, shared by the tests of the integer GEMM and convolution kernels:
a MatMul / Gemm unit (qgemm_unit_model) and a Conv unit over conv_cases' geometries (qconv_unit_model), each with
an int64 numpy replica of what OptimEP's integer unit computes (exact sums, then the float32 epilogue); a unit
whose output a QDQ Add takes (unit_add_model: a residual connection or a bias row, for the QAdd fold)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, requantize

N = helper.make_node


def _weights(rng: np.random.Generator, bits: int, shape) -> np.ndarray:
    """int8 weights over the range of `optim quantize --weight-bits`: [-127, 127], or [-64, 64] for 7 bits (which
    AVX2 runs on its u8 x s8 pair kernels)."""
    top = 127 if bits == 8 else 64
    return rng.integers(-top, top + 1, size=shape).astype(np.int8)


def qgemm_unit_model(m, k, n, *, x_type, y_type, gemm, trans_b, bias, relu, per_channel, seed, lead=(), w_bits=8):
    rng = np.random.default_rng(seed)
    x_np = np.uint8 if x_type == "u8" else np.int8
    y_np = np.uint8 if y_type == "u8" else np.int8
    x_zp = np.array(rng.integers(100, 156) if x_type == "u8" else rng.integers(-20, 20), dtype=x_np)
    x_scale = np.float32(rng.uniform(0.01, 0.05))
    w = _weights(rng, w_bits, (n, k) if trans_b else (k, n))
    w_scale = (rng.uniform(0.002, 0.01, size=n) if per_channel else rng.uniform(0.002, 0.01, size=())).astype(np.float32)
    y_zp = np.array(rng.integers(90, 160) if y_type == "u8" else rng.integers(-10, 10), dtype=y_np)
    y_scale = np.float32(rng.uniform(0.5, 2.0) * np.sqrt(k) * 0.02 * 0.006 * 60)
    b_q = rng.integers(-5000, 5000, size=n).astype(np.int32)
    b_scale = (x_scale * w_scale).astype(np.float32) if per_channel else np.float32(x_scale * w_scale)
    inits = {"x_scale": x_scale, "x_zp": x_zp, "w": w, "w_scale": w_scale, "y_scale": y_scale, "y_zp": y_zp}
    nodes = [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"]),
             N("DequantizeLinear", ["w", "w_scale"], ["wf"], axis=(0 if trans_b else 1))]
    if bias:
        inits.update({"b": b_q, "b_scale": b_scale})
        nodes.append(N("DequantizeLinear", ["b", "b_scale"], ["bf"], axis=0))
    if gemm:
        nodes.append(N("Gemm", ["xf", "wf"] + (["bf"] if bias else []), ["mm"], transB=int(trans_b), name="the_gemm"))
    else:
        nodes.append(N("MatMul", ["xf", "wf"], ["mm0"], name="the_matmul"))
        nodes.append(N("Add", ["mm0", "bf"], ["mm"]) if bias else N("Identity", ["mm0"], ["mm"]))
    last = "mm"
    if relu:
        nodes.append(N("Relu", ["mm"], ["r"]))
        last = "r"
    nodes.append(N("QuantizeLinear", [last, "y_scale", "y_zp"], ["y"]))
    x_shape = [*lead, m, k]
    graph = helper.make_graph(
        nodes, "qdq",
        [helper.make_tensor_value_info("x", TensorProto.UINT8 if x_type == "u8" else TensorProto.INT8, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8 if y_type == "u8" else TensorProto.INT8, [*lead, m, n])],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(x_np)
    x = rng.integers(info.min, info.max + 1, size=x_shape).astype(x_np)
    params = dict(inits, b_q=b_q if bias else None, b_scale=b_scale, trans_b=trans_b, relu=relu, y_np=y_np)
    return model, x, params


def qgemm_unit_replica(x, p: dict) -> np.ndarray:
    """OptimEP's integer unit, in numpy: exact sums, then the epilogue in float32 like the kernels."""
    w = p["w"].astype(np.int64)
    w = w.T if p["trans_b"] else w
    acc = (x.astype(np.int64) - np.int64(p["x_zp"])) @ w
    assert np.abs(acc).max() < 2**31
    bias = None
    if p["b_q"] is not None:
        bias = (p["b_q"].astype(np.float32) * np.asarray(p["b_scale"], np.float32)).astype(np.float32)
    info = np.iinfo(p["y_np"])
    lo = max(info.min, int(p["y_zp"])) if p["relu"] else info.min
    return requantize(acc, p["x_scale"], p["w_scale"], p["y_scale"], p["y_zp"], lo, info.max, bias).astype(p["y_np"])


def qconv_unit_model(c: dict):
    """A QDQ Conv unit (DequantizeLinear x / w / bias -> Conv [-> Relu] -> QuantizeLinear) of conv_cases' geometry c;
    returns (model bytes, an input, its quantization parameters)."""
    rng = np.random.default_rng(c["seed"])
    x_np = np.uint8 if c["x_type"] == "u8" else np.int8
    cin, cout = c["cin_g"] * c["groups"], c["cout_g"] * c["groups"]
    x_zp = np.array(rng.integers(100, 156) if c["x_type"] == "u8" else rng.integers(-20, 20), dtype=x_np)
    w = _weights(rng, c.get("w_bits", 8), (cout, c["cin_g"], *c["kernel"]))
    w_scale = rng.uniform(0.002, 0.01, size=cout).astype(np.float32)
    k = c["cin_g"] * int(np.prod(c["kernel"]))
    y_scale = np.float32(0.02 * 0.006 * np.sqrt(k) * 60)
    inits = {"x_scale": np.float32(0.02), "x_zp": x_zp, "w": w, "w_scale": w_scale,
             "w_zp": np.full(cout, c["w_zero"], np.int8), "b": rng.integers(-3000, 3000, size=cout).astype(np.int32),
             "b_scale": (np.float32(0.02) * w_scale).astype(np.float32), "y_scale": y_scale,
             "y_zp": np.array(128, np.uint8) if c["y_type"] == "u8" else np.array(-7, np.int8)}
    nodes = [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"]),
             N("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"], axis=0),
             N("DequantizeLinear", ["b", "b_scale"], ["bf"], axis=0),
             N("Conv", ["xf", "wf", "bf"], ["cv"], strides=c["strides"], dilations=c["dilations"], pads=c["pads"],
               group=c["groups"], kernel_shape=c["kernel"])]
    last = "cv"
    if c["relu"]:
        nodes.append(N("Relu", ["cv"], ["r"]))
        last = "r"
    nodes.append(N("QuantizeLinear", [last, "y_scale", "y_zp"], ["y"]))
    shape = [c["n"], cin, *c["size"]]
    graph = helper.make_graph(nodes, "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8 if x_np is np.uint8 else TensorProto.INT8, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8 if c["y_type"] == "u8" else TensorProto.INT8, None)],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(x_np)
    return model, rng.integers(info.min, info.max + 1, size=shape).astype(x_np), inits


def qconv_unit_replica(x, c: dict, p: dict) -> np.ndarray:
    """Exact int64 convolution of (x - zx) and (w - zw) with zero padding, then the epilogue in float32."""
    sp = c["spatial"]
    if sp == 1:  # as 2-D with height 1
        c = dict(c, spatial=2, kernel=[1, *c["kernel"]], strides=[1, *c["strides"]], dilations=[1, *c["dilations"]],
                 pads=[0, c["pads"][0], 0, c["pads"][1]])
        x, p = x[:, :, None, :], dict(p, w=p["w"][:, :, None, :])
    (kh, kw), (sh, sw), (dh, dw) = c["kernel"], c["strides"], c["dilations"]
    wq = p["w"].astype(np.int64) - np.int64(c["w_zero"])
    xs = np.pad(x.astype(np.int64) - np.int64(p["x_zp"]),
                ((0, 0), (0, 0), (c["pads"][0], c["pads"][2]), (c["pads"][1], c["pads"][3])))
    n, _, hp, wp = xs.shape
    oh, ow = (hp - (kh - 1) * dh - 1) // sh + 1, (wp - (kw - 1) * dw - 1) // sw + 1
    cout, cin_g = wq.shape[:2]
    g, cout_g = c["groups"], cout // c["groups"]
    acc = np.zeros((n, cout, oh, ow), np.int64)
    for gi in range(g):
        xg = xs[:, gi * cin_g:(gi + 1) * cin_g]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
                acc[:, gi * cout_g:(gi + 1) * cout_g] += np.einsum("nchw,oc->nohw", patch, wq[gi * cout_g:(gi + 1) * cout_g, :, ky, kx])
    bias = (p["b"].astype(np.float32) * p["b_scale"]).astype(np.float32)
    info = np.iinfo(p["y_zp"].dtype)
    y = requantize(acc, p["x_scale"], p["w_scale"], p["y_scale"], p["y_zp"], int(p["y_zp"]) if c["relu"] else info.min,
                   info.max, bias, channel_axis=1).astype(p["y_zp"].dtype)
    return y[:, :, 0, :] if sp == 1 else y


def unit_add_model(unit: str, *, group: int = 1, relu: bool = False, other_type: str = "u8", out_type: str = "u8",
           cout: int = 32, keep_unit_output: bool = False, batch: int = 2, seed: int = 0, w_top: int = 127,
           cin: int = 32, hw: int = 9):
    """x (u8) -> DQ -> unit (Conv, or MatMul over [batch, 9, 32]) -> Q -> DQ -> Add(DQ(other)) [-> Relu] -> Q -> y.
    Conv: other is a residual of the output's shape, from a 1x1 QDQ convolution of x (a ResNet's downsampling
    branch: channels last like the unit); MatMul: a quantized bias row (a constant). out_type: the unit's
    quantized output and y (the fold needs them alike). w_top: the unit's weights lie in [-w_top, w_top] (64: 7-bit
    weights, which AVX2 runs on its u8 x s8 pair kernels); cin, hw: the convolution's input channels and image size."""
    rng = np.random.default_rng(seed)
    o_np = np.uint8 if other_type == "u8" else np.int8
    y_np, y_proto = (np.uint8, TensorProto.UINT8) if out_type == "u8" else (np.int8, TensorProto.INT8)
    if unit == "conv":
        x_shape, y_shape = [batch, cin, hw, hw], [batch, cout, hw, hw]
        w = rng.integers(-w_top, w_top + 1, (cout, cin // group, 3, 3)).astype(np.int8)
        w_scale = rng.uniform(0.002, 0.01, cout).astype(np.float32)
        inits = {"w": w, "ws": w_scale, "wz": np.zeros(cout, np.int8), "b": rng.standard_normal(cout).astype(np.float32),
                 "w1": rng.integers(-127, 128, (cout, cin, 1, 1)).astype(np.int8), "w1s": np.float32(0.003)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
              N("Conv", ["xf", "wf", "b"], ["u"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group, name="unit"),
              N("DequantizeLinear", ["w1", "w1s"], ["w1f"]), N("Conv", ["xf", "w1f"], ["r1"], name="branch"),
              N("QuantizeLinear", ["r1", "os", "oz"], ["other"])]
    else:
        k, n = 32, 24
        x_shape, y_shape = [batch, 9, k], [batch, 9, n]
        inits = {"w": rng.integers(-w_top, w_top + 1, (k, n)).astype(np.int8), "ws": np.float32(0.004), "wz": np.int8(0),
                 "other": rng.integers(np.iinfo(o_np).min, np.iinfo(o_np).max + 1, n).astype(o_np)}
        op = [N("DequantizeLinear", ["w", "ws", "wz"], ["wf"]), N("MatMul", ["xf", "wf"], ["u"], name="unit")]
    inits.update({"xs": np.float32(0.02), "xz": np.uint8(120), "us": np.float32(0.05), "uz": np.array(128 if out_type == "u8" else 3, y_np),
                  "os": np.float32(0.03), "oz": np.array(5, o_np), "ys": np.float32(0.07),
                  "yz": np.array(100 if out_type == "u8" else -20, y_np)})
    nodes = [N("DequantizeLinear", ["x", "xs", "xz"], ["xf"]), *op,
             N("QuantizeLinear", ["u", "us", "uz"], ["uq"]), N("DequantizeLinear", ["uq", "us", "uz"], ["ud"]),
             N("DequantizeLinear", ["other", "os", "oz"], ["of"]), N("Add", ["ud", "of"], ["s"], name="add")]
    if relu:
        nodes.append(N("Relu", ["s"], ["r"]))
    nodes.append(N("QuantizeLinear", ["r" if relu else "s", "ys", "yz"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)]
    outputs = [helper.make_tensor_value_info("y", y_proto, y_shape)]
    if keep_unit_output:  # both operands leave the graph: nothing to fold into
        outputs.append(helper.make_tensor_value_info("uq", y_proto, y_shape))
        if unit == "conv":
            outputs.append(helper.make_tensor_value_info("other", TensorProto.UINT8 if other_type == "u8" else TensorProto.INT8,
                                                         y_shape))
    graph = helper.make_graph(nodes, "qadd_fold", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)
    return model.SerializeToString(), {"x": rng.integers(0, 256, x_shape).astype(np.uint8)}
