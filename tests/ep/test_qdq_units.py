"""QDQ MatMul/Gemm units run as integer GEMMs on OptimEP.

Three references: (1) a numpy replica of OptimEP's integer unit (exact int64 dot products, then the
epilogue's float32 operations): OptimEP must equal it bit for bit on both ISAs, which also proves the
unit ran as integer compute; (2) the exact real-number result rounded once: OptimEP may differ by
one step only where float32 rounding of the scale products decides a tie; (3) ONNX Runtime's CPU EP
with optimizations disabled (dequantize, float GEMM, quantize): within INT8_STEP_TOLERANCE steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION, ISAS, requantize, run_cpu, run_optim
from qdq_models import qgemm_unit_model, qgemm_unit_replica
from optim.ep_plugin import placement, session

INT8_STEP_TOLERANCE = 1  # quantization steps between OptimEP and the float QDQ reference
N = helper.make_node


CASES = {
    "matmul_u8_perchannel_bias_relu": dict(m=7, k=64, n=33, x_type="u8", y_type="u8", gemm=False, trans_b=False, bias=True, relu=True, per_channel=True),
    "matmul_s8_pertensor_3d": dict(m=5, k=31, n=16, x_type="s8", y_type="s8", gemm=False, trans_b=False, bias=False, relu=False, per_channel=False, lead=(3,)),
    "gemm_u8_transB_bias": dict(m=9, k=100, n=40, x_type="u8", y_type="u8", gemm=True, trans_b=True, bias=True, relu=False, per_channel=True),
    "gemm_s8_relu_odd_k": dict(m=1, k=257, n=10, x_type="s8", y_type="u8", gemm=True, trans_b=False, bias=True, relu=True, per_channel=True),
    "matmul_large_threads": dict(m=130, k=512, n=96, x_type="u8", y_type="u8", gemm=False, trans_b=False, bias=True, relu=False, per_channel=True),
    "matmul_7bit_large_threads": dict(m=130, k=512, n=96, x_type="s8", y_type="u8", gemm=False, trans_b=False, bias=True, relu=True, per_channel=True, w_bits=7),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(CASES))
def test_qdq_unit_equals_the_integer_replica_and_stays_within_a_step_of_the_float_reference(cid, isa):
    model, x, p = qgemm_unit_model(**CASES[cid], seed=len(cid))
    got = run_optim(model, {"x": x}, isa=isa)[0]
    assert got.dtype == p["y_np"]
    np.testing.assert_array_equal(got, qgemm_unit_replica(x, p), err_msg=f"{cid}: not the integer unit's result")
    ref = run_cpu(model, {"x": x})[0]
    steps = np.abs(got.astype(np.int32) - ref.astype(np.int32))
    assert steps.max() <= INT8_STEP_TOLERANCE, f"{cid}: {int(steps.max())} steps from the float QDQ reference"
    assert (steps > 0).mean() < 0.05, f"{cid}: {(steps > 0).mean():.1%} of outputs differ from the float reference"


@pytest.mark.parametrize("cid", sorted(CASES))
def test_the_whole_unit_is_claimed_and_compiled_into_one_integer_gemm(cid):
    model, x, _ = qgemm_unit_model(**CASES[cid], seed=3)
    p = placement(session(model))
    assert p.optim_nodes == p.total_nodes, p.summary()
    steps = [s for ss in p.compiled.values() for s in ss]
    name = "the_gemm" if CASES[cid]["gemm"] else "the_matmul"
    # Everything but a bias-less MatMul's Identity is inside the one QGemm (ORT's basic level may first
    # turn MatMul + Add into a Gemm named "<matmul>/MatMulAddFusion").
    assert [s for s in steps if s != "Identity ''"] in ([f"QGemm '{name}'"], [f"QGemm '{name}/MatMulAddFusion'"]), steps
    assert p.integer_units == 1


def test_a_unit_whose_middle_value_is_a_graph_output_stays_float_and_correct():
    """The float product is also a model output: it must be produced, so the unit is not fused."""
    model, x, p = qgemm_unit_model(**CASES["matmul_u8_perchannel_bias_relu"], seed=5)
    import onnx

    m = onnx.load_from_string(model)
    m.graph.output.append(helper.make_tensor_value_info("mm", TensorProto.FLOAT, None))
    model2 = m.SerializeToString()
    sess = session(model2, fallback=False)
    assert placement(sess).integer_units == 0
    got_q, got_mm = sess.run(None, {"x": x})
    ref_q, ref_mm = run_cpu(model2, {"x": x})
    np.testing.assert_allclose(got_mm, ref_mm, rtol=1e-4, atol=1e-4)
    assert np.abs(got_q.astype(np.int32) - ref_q.astype(np.int32)).max() <= INT8_STEP_TOLERANCE


# --- convolution units ------------------------------------------------------------------------------

def _qdq_conv_model(n, c, h, w, cout, k, *, stride, pad, group, x_type, relu, per_channel, seed):
    rng = np.random.default_rng(seed)
    x_np = np.uint8 if x_type == "u8" else np.int8
    x_zp = np.array(rng.integers(100, 156) if x_type == "u8" else rng.integers(-20, 20), dtype=x_np)
    x_scale = np.float32(0.02)
    wq = rng.integers(-127, 128, size=(cout, c // group, k, k)).astype(np.int8)
    w_scale = (rng.uniform(0.002, 0.01, size=cout) if per_channel else rng.uniform(0.002, 0.01, size=())).astype(np.float32)
    b_q = rng.integers(-3000, 3000, size=cout).astype(np.int32)
    b_scale = (x_scale * w_scale).astype(np.float32) if per_channel else np.float32(x_scale * w_scale)
    y_scale, y_zp = np.float32(0.02 * 0.006 * np.sqrt(c * k * k / group) * 60), np.array(rng.integers(100, 150), dtype=np.uint8)
    inits = {"x_scale": x_scale, "x_zp": x_zp, "w": wq, "w_scale": w_scale, "b": b_q, "b_scale": b_scale,
             "y_scale": y_scale, "y_zp": y_zp}
    nodes = [N("DequantizeLinear", ["x", "x_scale", "x_zp"], ["xf"]),
             N("DequantizeLinear", ["w", "w_scale"], ["wf"], axis=0),
             N("DequantizeLinear", ["b", "b_scale"], ["bf"], axis=0),
             N("Conv", ["xf", "wf", "bf"], ["cv"], name="the_conv", strides=[stride, stride], pads=[pad] * 4, group=group)]
    last = "cv"
    if relu:
        nodes.append(N("Relu", ["cv"], ["r"]))
        last = "r"
    nodes.append(N("QuantizeLinear", [last, "y_scale", "y_zp"], ["y"]))
    graph = helper.make_graph(
        nodes, "qconv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8 if x_type == "u8" else TensorProto.INT8, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(x_np)
    x = rng.integers(info.min, info.max + 1, size=(n, c, h, w)).astype(x_np)
    return model, x, dict(inits, stride=stride, pad=pad, group=group, relu=relu)


def _conv_replica(x, p):
    """Exact int64 convolution of (x - zx) with zero padding, then the epilogue in float32."""
    s, pad, g = p["stride"], p["pad"], p["group"]
    wq = p["w"].astype(np.int64)
    cout, cin_g, k, _ = wq.shape
    xs = np.pad(x.astype(np.int64) - np.int64(p["x_zp"]), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, hp, wp = xs.shape
    oh, ow = (hp - k) // s + 1, (wp - k) // s + 1
    acc = np.zeros((n, cout, oh, ow), np.int64)
    cout_g = cout // g
    for gi in range(g):
        xg = xs[:, gi * cin_g:(gi + 1) * cin_g]
        for ky in range(k):
            for kx in range(k):
                patch = xg[:, :, ky:ky + s * oh:s, kx:kx + s * ow:s]  # n, cin_g, oh, ow
                acc[:, gi * cout_g:(gi + 1) * cout_g] += np.einsum("nchw,oc->nohw", patch, wq[gi * cout_g:(gi + 1) * cout_g, :, ky, kx])
    w_scale = np.asarray(p["w_scale"], np.float32) * np.ones(cout, np.float32)
    bias = (p["b"].astype(np.float32) * np.asarray(p["b_scale"], np.float32)).astype(np.float32)
    lo = int(p["y_zp"]) if p["relu"] else 0
    return requantize(acc, p["x_scale"], w_scale, p["y_scale"], p["y_zp"], lo, 255, bias, channel_axis=1).astype(np.uint8)


CONV_CASES = {
    "conv3x3_u8_pad_relu": dict(n=2, c=8, h=9, w=11, cout=16, k=3, stride=1, pad=1, group=1, x_type="u8", relu=True, per_channel=True),
    "conv3x3_s8_stride2_odd_k": dict(n=1, c=3, h=15, w=15, cout=7, k=3, stride=2, pad=1, group=1, x_type="s8", relu=False, per_channel=True),
    "conv1x1_pertensor_wide": dict(n=1, c=33, h=20, w=20, cout=40, k=1, stride=1, pad=0, group=1, x_type="u8", relu=True, per_channel=False),
    "conv3x3_groups": dict(n=2, c=8, h=6, w=6, cout=8, k=3, stride=1, pad=1, group=4, x_type="u8", relu=False, per_channel=True),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(CONV_CASES))
def test_qdq_conv_unit_is_integer_and_exact(cid, isa):
    model, x, p = _qdq_conv_model(**CONV_CASES[cid], seed=len(cid))
    sess = session(model, fallback=False, isa=isa)
    assert placement(sess).integer_units == 1
    got = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, _conv_replica(x, p), err_msg=cid)
    ref = run_cpu(model, {"x": x})[0]
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE


# --- quantized tensors through data movement and MaxPool -----------------------------------------------

def _dq_op_q(op_nodes, out_scale, x_type="u8"):
    x_np = np.uint8 if x_type == "u8" else np.int8
    inits = {"s": np.float32(0.05), "z": np.array(7, x_np), "s_out": np.float32(out_scale), "shape": np.array([2, -1], np.int64),
             "starts": np.array([1, 2], np.int64), "ends": np.array([8, 7], np.int64), "axes": np.array([3, 2], np.int64),
             "steps": np.array([2, 1], np.int64), "picks": np.array([[2, 0], [1, 1]], np.int64),
             "wide": np.array([3, 1, 1, 1, 1], np.int64), "reps": np.array([1, 2, 1, 3], np.int64)}
    nodes = [N("DequantizeLinear", ["x", "s", "z"], ["xf"]), *op_nodes, N("QuantizeLinear", ["of", "s_out", "z"], ["y"])]
    elem = TensorProto.UINT8 if x_type == "u8" else TensorProto.INT8
    graph = helper.make_graph(nodes, "dq_op_q", [helper.make_tensor_value_info("x", elem, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", elem, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    info = np.iinfo(x_np)
    return model, np.random.default_rng(0).integers(info.min, info.max + 1, (2, 3, 8, 8)).astype(x_np)


PASSTHROUGH = {
    "maxpool": [N("MaxPool", ["xf"], ["of"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="op")],
    "reshape": [N("Reshape", ["xf", "shape"], ["of"], name="op")],
    "flatten": [N("Flatten", ["xf"], ["of"], axis=2, name="op")],
    "transpose": [N("Transpose", ["xf"], ["of"], perm=[0, 2, 3, 1], name="op")],  # attention heads, decoder maps
    "slice": [N("Slice", ["xf", "starts", "ends", "axes", "steps"], ["of"], name="op")],
    "gather": [N("Gather", ["xf", "picks"], ["of"], axis=1, name="op")],
    "expand": [N("Expand", ["xf", "wide"], ["of"], name="op")],
    "tile": [N("Tile", ["xf", "reps"], ["of"], name="op")],
}


@pytest.mark.parametrize("x_type", ["u8", "s8"])
@pytest.mark.parametrize("kind", sorted(PASSTHROUGH))
def test_same_quantization_on_both_sides_runs_the_op_on_the_quantized_tensor(kind, x_type):
    model, x = _dq_op_q(PASSTHROUGH[kind], out_scale=0.05, x_type=x_type)
    sess = session(model, fallback=False)
    steps = [s for ss in placement(sess).compiled.values() for s in ss]
    assert steps == [f"{PASSTHROUGH[kind][0].op_type} 'op'"], steps
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])


def test_different_output_quantization_keeps_the_conversions():
    model, x = _dq_op_q(PASSTHROUGH["maxpool"], out_scale=0.1)
    sess = session(model, fallback=False)
    steps = [s.split(" ")[0] for ss in placement(sess).compiled.values() for s in ss]
    assert steps == ["DequantizeLinear", "MaxPool", "QuantizeLinear"], steps
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], run_cpu(model, {"x": x})[0])


# --- quantized Add and Mul (residual connections, squeeze-excite scales) --------------------------------

def _qdq_add(a_shape, b_shape, a_type, b_type, y_type, relu, seed, op="Add", scales=None):
    rng = np.random.default_rng(seed)
    np_of = {"u8": np.uint8, "s8": np.int8}
    onnx_of = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8}
    sa, sb, sy = scales or (rng.uniform(0.01, 0.1), rng.uniform(0.01, 0.1), rng.uniform(0.02, 0.2))
    inits = {"sa": np.float32(sa), "za": np.array(rng.integers(0, 50), np_of[a_type]),
             "sb": np.float32(sb), "zb": np.array(rng.integers(0, 50), np_of[b_type]),
             "sy": np.float32(sy), "zy": np.array(rng.integers(0, 60), np_of[y_type])}
    nodes = [N("DequantizeLinear", ["a", "sa", "za"], ["af"]), N("DequantizeLinear", ["b", "sb", "zb"], ["bf"]),
             N(op, ["af", "bf"], ["s"], name="the_add")]
    if relu:
        nodes.append(N("Relu", ["s"], ["r"]))
    nodes.append(N("QuantizeLinear", ["r" if relu else "s", "sy", "zy"], ["y"]))
    graph = helper.make_graph(nodes, "qadd", [helper.make_tensor_value_info("a", onnx_of[a_type], a_shape),
                                              helper.make_tensor_value_info("b", onnx_of[b_type], b_shape)],
                              [helper.make_tensor_value_info("y", onnx_of[y_type], None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()

    def draw(shape, t):
        info = np.iinfo(np_of[t])
        return rng.integers(info.min, info.max + 1, shape).astype(np_of[t])

    return model, {"a": draw(a_shape, a_type), "b": draw(b_shape, b_type)}


ADD_CASES = {
    "same_shape_u8_relu": dict(a_shape=[2, 16, 9, 9], b_shape=[2, 16, 9, 9], a_type="u8", b_type="u8", y_type="u8", relu=True),
    "same_shape_s8_mixed": dict(a_shape=[3, 37], b_shape=[3, 37], a_type="s8", b_type="u8", y_type="s8", relu=False),
    "same_shape_s8_s8": dict(a_shape=[2, 40], b_shape=[2, 40], a_type="s8", b_type="s8", y_type="u8", relu=False),
    "same_shape_u8_u8_to_s8": dict(a_shape=[5, 33], b_shape=[5, 33], a_type="u8", b_type="u8", y_type="s8", relu=False),
    "broadcast": dict(a_shape=[2, 3, 4], b_shape=[3, 1], a_type="u8", b_type="u8", y_type="u8", relu=False),
    "broadcast_leading": dict(a_shape=[1, 5, 6], b_shape=[3, 5, 6], a_type="u8", b_type="s8", y_type="u8", relu=False),
    "broadcast_scalar": dict(a_shape=[4, 8], b_shape=[], a_type="s8", b_type="u8", y_type="s8", relu=True),
    "rows_repeat": dict(a_shape=[2, 3, 33], b_shape=[2, 1, 33], a_type="u8", b_type="u8", y_type="u8", relu=False),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(ADD_CASES))
def test_qdq_add_runs_quantized_and_equals_onnx_exactly(cid, isa):
    model, feeds = _qdq_add(**ADD_CASES[cid], seed=len(cid))
    sess = session(model, fallback=False, isa=isa)
    steps = [s for ss in placement(sess).compiled.values() for s in ss]
    assert steps == ["QAdd 'the_add'"], steps
    np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


MUL_CASES = {
    **{k: v for k, v in ADD_CASES.items() if not k.startswith("broadcast_leading")},
    # A squeeze-excite scale: per image and channel, over every pixel (NCHW: broadcast copy), and the same
    # channels last (rows of channels; the rows of one image read one scale row, tiled into one kernel call), with
    # the whole side second too; a large one: several calls per image, threads splitting an image.
    "squeeze_excite": dict(a_shape=[2, 24, 7, 9], b_shape=[2, 24, 1, 1], a_type="u8", b_type="u8", y_type="u8", relu=False),
    "squeeze_excite_nhwc": dict(a_shape=[2, 5, 6, 24], b_shape=[2, 1, 1, 24], a_type="u8", b_type="s8", y_type="u8", relu=False),
    "squeeze_excite_nhwc_large": dict(a_shape=[3, 24, 23, 32], b_shape=[3, 1, 1, 32], a_type="u8", b_type="u8", y_type="u8",
                                      relu=True),
    "rows_repeat_first": dict(a_shape=[1, 1, 40], b_shape=[3, 4, 40], a_type="s8", b_type="u8", y_type="s8", relu=True),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(MUL_CASES))
def test_qdq_mul_runs_quantized_and_equals_onnx_exactly(cid, isa):
    model, feeds = _qdq_add(**MUL_CASES[cid], seed=len(cid) + 1, op="Mul")
    sess = session(model, fallback=False, isa=isa)
    steps = [s for ss in placement(sess).compiled.values() for s in ss]
    assert steps == ["QMul 'the_add'"], steps
    np.testing.assert_array_equal(sess.run(None, feeds)[0], run_cpu(model, feeds)[0])


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(log_sy=st.floats(-20, 8), ratios=st.tuples(*[st.sampled_from([0.5, 0.25, 0.75, 1.0, 2.0, 0.3])] * 2),
       op=st.sampled_from(["Add", "Mul"]), types=st.sampled_from([("u8", "u8", "u8"), ("s8", "u8", "s8"), ("s8", "s8", "u8")]),
       relu=st.booleans())
def test_every_byte_pair_of_a_quantized_add_or_mul_equals_onnx_on_every_isa(log_sy, ratios, op, types, relu):
    """Every pair of input bytes, output scales from 2^-20 to 2^8, gives ONNX's integers on every ISA. Input
    scales that are simple fractions of the output's put many quotients on the .5 ties, where a kernel that
    multiplied by the reciprocal instead of dividing would round some the other way (checked: it fails)."""
    a_type, b_type, y_type = types
    sy = float(np.float32(2.0 ** log_sy))
    model, _ = _qdq_add([256, 256], [256, 256], a_type, b_type, y_type, relu, seed=int(abs(log_sy) * 1000) % 997,
                        op=op, scales=(sy * ratios[0], sy * ratios[1], sy))
    lo_a, lo_b = (0 if a_type == "u8" else -128), (0 if b_type == "u8" else -128)
    a = np.add.outer(np.arange(256), np.zeros(256, np.int64)) + lo_a
    b = np.add.outer(np.zeros(256, np.int64), np.arange(256)) + lo_b
    feeds = {"a": a.astype(np.uint8 if a_type == "u8" else np.int8), "b": b.astype(np.uint8 if b_type == "u8" else np.int8)}
    want = run_cpu(model, feeds)[0]
    for isa in ISAS:
        np.testing.assert_array_equal(run_optim(model, feeds, isa=isa)[0], want, err_msg=f"{isa} {op} sy {sy} ratios {ratios}")


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(m=st.integers(1, 80), k=st.integers(1, 300), n=st.integers(1, 80), x_type=st.sampled_from(["u8", "s8"]),
       y_type=st.sampled_from(["u8", "s8"]), trans_b=st.booleans(), relu=st.booleans(), w_bits=st.sampled_from([8, 7]))
def test_every_gemm_shape_equals_the_integer_replica_on_every_isa(m, k, n, x_type, y_type, trans_b, relu, w_bits):
    """Tile edges of every kernel: rows around 4/6/8/32, columns around 16/32 (odd panel counts), K around
    the pair/quad/64-byte AMX steps; 7-bit weights run on AVX2's u8 x s8 pair kernel."""
    model, x, p = qgemm_unit_model(m, k, n, x_type=x_type, y_type=y_type, gemm=True, trans_b=trans_b, bias=True, relu=relu,
                                   per_channel=True, seed=m * 1000 + k * 10 + n, w_bits=w_bits)
    want = qgemm_unit_replica(x, p)
    for isa in ISAS:
        np.testing.assert_array_equal(run_optim(model, {"x": x}, isa=isa)[0], want, err_msg=f"{isa} m={m} k={k} n={n}")


@pytest.mark.parametrize("w_bits", [8, 7])
def test_a_gemm_wide_enough_for_long_row_tasks_equals_the_integer_replica_on_every_isa(w_bits):
    """560 columns give the pool 9 column tasks, so on a host of up to 4 hardware threads rows go in tasks that keep
    A in L2 (gemm_tasks.h; with more threads 9 are too few and rows stay in tasks of 64): 300 rows of K = 2400 as
    int16 pairs in two (152 + 148 with the 4- and 8-row tiles), as bytes (u8 x s8) in one; the partial panel at the
    end."""
    m, k, n = 300, 2400, 560
    model, x, p = qgemm_unit_model(m, k, n, x_type="u8", y_type="s8", gemm=True, trans_b=True, bias=True, relu=False,
                                   per_channel=True, seed=w_bits, w_bits=w_bits)
    want = qgemm_unit_replica(x, p)
    for isa in ISAS:
        np.testing.assert_array_equal(run_optim(model, {"x": x}, isa=isa)[0], want, err_msg=f"{isa} {w_bits}-bit weights")


# --- activation x activation MatMul units (attention) -------------------------------------------------

def _probabilities(rng, shape):
    """uint8 rows as a softmax's quantized output (scale 1/255, zero point 0): each row sums to about 255, so every
    pair of neighbours does too, which is what lets AVX2's u8 x s8 pair kernel take attention's P x V exactly."""
    p = rng.dirichlet(np.full(shape[-1], 0.3), size=int(np.prod(shape[:-1])))
    return np.clip(np.round(p * 255), 0, 255).astype(np.uint8).reshape(shape)


def _act_matmul_model(a_shape, b_shape, a_type, b_type, relu, seed, a_probabilities=False):
    rng = np.random.default_rng(seed)
    np_of = {"u8": np.uint8, "s8": np.int8}
    onnx_of = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8}
    za = np.array(rng.integers(100, 156) if a_type == "u8" else rng.integers(-20, 20), np_of[a_type])
    zb = np.array(rng.integers(100, 156) if b_type == "u8" else rng.integers(-20, 20), np_of[b_type])
    k = a_shape[-1]
    inits = {"sa": np.float32(0.03), "za": za, "sb": np.float32(0.02), "zb": zb,
             "ys": np.float32(0.03 * 0.02 * np.sqrt(k) * 60), "yz": np.array(128, np.uint8)}
    nodes = [N("DequantizeLinear", ["a", "sa", "za"], ["af"]), N("DequantizeLinear", ["b", "sb", "zb"], ["bf"]),
             N("MatMul", ["af", "bf"], ["mm"], name="attn")]
    last = "mm"
    if relu:
        nodes.append(N("Relu", ["mm"], ["r"]))
        last = "r"
    nodes.append(N("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    graph = helper.make_graph(nodes, "qmatmul", [helper.make_tensor_value_info("a", onnx_of[a_type], a_shape),
                                                 helper.make_tensor_value_info("b", onnx_of[b_type], b_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION).SerializeToString()
    feeds = {n: rng.integers(np.iinfo(np_of[t]).min, np.iinfo(np_of[t]).max + 1, s).astype(np_of[t])
             for n, t, s in (("a", a_type, a_shape), ("b", b_type, b_shape))}
    if a_probabilities:
        feeds["a"] = _probabilities(rng, a_shape)
    return model, feeds, inits


def _act_matmul_replica(feeds, p, relu):
    acc = (feeds["a"].astype(np.int64) - np.int64(p["za"])) @ (feeds["b"].astype(np.int64) - np.int64(p["zb"]))
    return requantize(acc, p["sa"], p["sb"], p["ys"], p["yz"], int(p["yz"]) if relu else 0, 255).astype(np.uint8)


ACT_CASES = {
    "attention_scores_u8u8": dict(a_shape=[2, 3, 7, 16], b_shape=[2, 3, 16, 7], a_type="u8", b_type="u8", relu=False),
    "attention_values_s8u8_relu": dict(a_shape=[1, 4, 9, 9], b_shape=[1, 4, 9, 5], a_type="s8", b_type="u8", relu=True),
    "broadcast_leading_dims": dict(a_shape=[1, 3, 5, 33], b_shape=[2, 1, 33, 20], a_type="u8", b_type="s8", relu=False),
    "shared_2d_b": dict(a_shape=[3, 6, 10], b_shape=[10, 17], a_type="s8", b_type="s8", relu=False),
    # rows past one tile of every kernel (AVX-512: 8), whole and partial panels of 16 columns, odd K
    "long_sequence": dict(a_shape=[1, 2, 37, 65], b_shape=[1, 2, 65, 48], a_type="u8", b_type="u8", relu=False),
    # one matrix: split over the pool, A widened in row blocks there (SegFormer's one-head attention)
    "one_head_long": dict(a_shape=[1, 1, 4100, 33], b_shape=[1, 1, 33, 40], a_type="s8", b_type="u8", relu=True),
    # attention's P x V: A a softmax's bytes (AVX2 takes it on its u8 x s8 pair kernel; full-range A falls back to
    # int16 pairs above), B's zero point far from 128 (the row compensation), heads per task and split alike
    "probabilities_times_values": dict(a_shape=[2, 6, 40, 77], b_shape=[2, 6, 77, 32], a_type="u8", b_type="u8",
                                       relu=False, a_probabilities=True),
    "probabilities_one_head_long": dict(a_shape=[1, 1, 2100, 130], b_shape=[1, 1, 130, 24], a_type="u8", b_type="s8",
                                        relu=False, a_probabilities=True),
}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cid", sorted(ACT_CASES))
def test_activation_matmul_unit_is_integer_and_exact(cid, isa):
    case = ACT_CASES[cid]
    model, feeds, p = _act_matmul_model(**case, seed=len(cid))
    sess = session(model, fallback=False, isa=isa)
    assert [s for steps in placement(sess).compiled.values() for s in steps] == ["QMatMul 'attn'"]
    got = sess.run(None, feeds)[0]
    np.testing.assert_array_equal(got, _act_matmul_replica(feeds, p, case["relu"]), err_msg=cid)
    ref = run_cpu(model, feeds)[0]
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= INT8_STEP_TOLERANCE
