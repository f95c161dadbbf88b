"""Seeded, bounded fuzzing of the model path: valid models mutated (attributes, shapes, dtypes,
initializers truncated or resized, huge and zero dims, bad quantization scales and zero points) and
run on OptimEP. Every case must end in outputs or a Python exception, never a crash or a hang; when
OptimEP and ONNX Runtime's CPU EP both produce outputs they must agree.

Cases that once broke something are kept in REGRESSIONS and run every time."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers import IR_VERSION
from optim.ep_plugin import session

N = helper.make_node
MAX_ELEMENTS = 1 << 20  # inputs above this are not fed (the case still builds a session)
SYMBOLIC_DIM = 6  # the size fed for a symbolic input dimension
HUGE_CONSTANT = 1e18  # float constants at least this large are not compared (see _has_non_finite_constants)
FUZZ_TOLERANCE = 1e-3  # OptimEP vs CPU EP on fuzzed float graphs (random weights, several ops deep)
# QDQ graphs: integer units round once where the float reference rounds after float sums, so an
# intermediate may differ by one step and grow through the next unit: a few output steps.
QDQ_STEPS = 3


def _float_base() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32),
             "g": rng.standard_normal((5, 16)).astype(np.float32), "shape": np.array([0, -1], np.int64)}
    nodes = [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             N("Relu", ["c"], ["r"]), N("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             N("GlobalAveragePool", ["p"], ["gap"]), N("Reshape", ["gap", "shape"], ["f"]),
             N("Transpose", ["f"], ["ft"], perm=[1, 0]), N("Transpose", ["ft"], ["f2"], perm=[1, 0]),
             N("Gemm", ["f2", "g"], ["y0"], transB=1, alpha=1.0), N("Softmax", ["y0"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "fuzz_float", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _qdq_base() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = {"xs": np.float32(0.05), "xz": np.uint8(128), "w": rng.integers(-127, 128, (8, 6)).astype(np.int8),
             "ws": np.full(6, 0.01, np.float32), "ys": np.float32(0.1), "yz": np.uint8(100),
             "wc": rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8), "wcs": np.full(4, 0.01, np.float32)}
    nodes = [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), N("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             N("DequantizeLinear", ["w", "ws"], ["wd"], axis=1), N("MatMul", ["xd", "wd"], ["m"]), N("Relu", ["m"], ["mr"]),
             N("QuantizeLinear", ["mr", "ys", "yz"], ["mq"]), N("DequantizeLinear", ["mq", "ys", "yz"], ["md"]),
             N("Reshape", ["md", "rs"], ["img"]), N("QuantizeLinear", ["img", "ys", "yz"], ["iq"]),
             N("DequantizeLinear", ["iq", "ys", "yz"], ["id"]), N("DequantizeLinear", ["wc", "wcs"], ["wcd"], axis=0),
             N("Conv", ["id", "wcd"], ["cv"], pads=[1, 1, 1, 1]), N("QuantizeLinear", ["cv", "ys", "yz"], ["cq"]),
             N("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    inits["rs"] = np.array([-1, 2, 3, 1], np.int64)
    graph = helper.make_graph(nodes, "fuzz_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=IR_VERSION)


def _indices_base() -> onnx.ModelProto:
    """What transformers do with their int64 inputs: an embedding Gather, a mask from a comparison,
    Cast, Where, Concat, Expand, ReduceL2, and shape plumbing (Shape -> Gather -> Concat -> Reshape)
    that the partitioner must keep out of OptimEP's partitions where it decides a shape."""
    rng = np.random.default_rng(2)
    inits = {"emb": rng.standard_normal((8, 4)).astype(np.float32), "zero": np.array(0, np.int64),
             "axes": np.array([2], np.int64), "neg": np.array(-1e4, np.float32), "first": np.array([0], np.int64),
             "tail": np.array([-1], np.int64), "wide": np.array([2, 48], np.int64)}
    nodes = [N("Gather", ["emb", "ids"], ["e"]), N("Greater", ["ids", "zero"], ["m"]), N("Unsqueeze", ["m", "axes"], ["m3"]),
             N("Where", ["m3", "e", "neg"], ["w"]), N("Cast", ["m3"], ["mf"], to=TensorProto.FLOAT), N("Mul", ["w", "mf"], ["wm"]),
             N("Concat", ["wm", "e"], ["c"], axis=2), N("Shape", ["c"], ["s"]), N("Gather", ["s", "first"], ["s0"]),
             N("Concat", ["s0", "tail"], ["rs"], axis=0), N("Reshape", ["c", "rs"], ["r"]),
             N("ReduceL2", ["r"], ["n"], axes=[1], keepdims=1), N("Expand", ["n", "wide"], ["ne"]), N("Div", ["r", "ne"], ["y"])]
    # A symbolic sequence length keeps the shape plumbing from being folded away before partitioning.
    graph = helper.make_graph(nodes, "fuzz_indices", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, "seq"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


BASES = {"float": _float_base(), "qdq": _qdq_base(), "indices": _indices_base()}
# Mostly small values (which ONNX Runtime accepts, so OptimEP's kernels see them), sometimes extreme.
INT_VALUES = st.one_of(st.integers(-2, 6), st.integers(-2, 6), st.sampled_from([-(2**40), 2**31 - 1, 2**40]))
FLOAT_VALUES = st.sampled_from([0.0, -0.0, -1.0, 1e-30, 1e30, float("nan"), float("inf"), 0.5])


@st.composite
def mutations(draw):
    """(base name, a list of mutations) — each mutation a tuple understood by _mutate."""
    base = draw(st.sampled_from(sorted(BASES)))
    model = BASES[base]
    kinds = st.sampled_from(["attr", "input_dim", "input_dtype", "init_dims", "init_truncate", "init_value", "opset"])
    muts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(kinds)
        if kind == "attr":
            node = draw(st.integers(0, len(model.graph.node) - 1))
            muts.append((kind, node, draw(st.integers(0, 5)), draw(INT_VALUES), draw(st.integers(0, 3))))
        elif kind == "input_dim":
            muts.append((kind, draw(st.integers(0, 3)), draw(st.sampled_from([0, 1, 2, 3, 9, 17, 2**20, 2**40]))))
        elif kind == "input_dtype":
            muts.append((kind, draw(st.sampled_from([TensorProto.DOUBLE, TensorProto.UINT8, TensorProto.INT64, TensorProto.FLOAT16]))))
        elif kind == "init_dims":
            muts.append((kind, draw(st.integers(0, 20)), draw(st.integers(0, 3)), draw(st.sampled_from([0, 1, 2, 5, 2**31]))))
        elif kind == "init_truncate":
            muts.append((kind, draw(st.integers(0, 20)), draw(st.integers(0, 64))))
        elif kind == "init_value":
            muts.append((kind, draw(st.integers(0, 20)), draw(FLOAT_VALUES), draw(INT_VALUES)))
        else:
            muts.append((kind, draw(st.sampled_from([7, 11, 13, 18, 21]))))
    return base, muts


def _mutate(base: str, muts) -> bytes:
    m = onnx.ModelProto()
    m.CopyFrom(BASES[base])
    g = m.graph
    for mut in muts:
        kind = mut[0]
        if kind == "attr":
            _, ni, ai, value, pos = mut
            node = g.node[ni % len(g.node)]
            if node.attribute:
                a = node.attribute[ai % len(node.attribute)]
                if a.type == onnx.AttributeProto.INTS and a.ints:
                    a.ints[pos % len(a.ints)] = value
                elif a.type == onnx.AttributeProto.INT:
                    a.i = value
                elif a.type == onnx.AttributeProto.FLOAT:
                    a.f = float(value)
        elif kind == "input_dim":
            dims = g.input[0].type.tensor_type.shape.dim
            dims[mut[1] % len(dims)].dim_value = mut[2]
        elif kind == "input_dtype":
            g.input[0].type.tensor_type.elem_type = mut[1]
        elif kind in ("init_dims", "init_truncate", "init_value"):
            t = g.initializer[mut[1] % len(g.initializer)]
            try:
                numpy_helper.to_array(t)
            except Exception:
                continue  # an earlier mutation already broke this tensor: leave it broken
            if kind == "init_dims" and t.dims:
                t.dims[mut[2] % len(t.dims)] = mut[3]
            elif kind == "init_truncate":
                arr = numpy_helper.to_array(t)
                raw = arr.tobytes()
                t.ClearField("float_data")
                t.ClearField("int32_data")
                t.ClearField("int64_data")
                t.raw_data = raw[: max(0, len(raw) - mut[2])]
            elif kind == "init_value":
                arr = numpy_helper.to_array(t).copy()
                if arr.size:
                    flat = arr.reshape(-1)
                    if arr.dtype.kind == "f":
                        flat[0] = mut[2]
                    else:
                        info = np.iinfo(arr.dtype)
                        flat[0] = int(np.clip(mut[3], info.min, info.max))
                    t.CopyFrom(numpy_helper.from_array(arr, t.name))
        elif kind == "opset":
            m.opset_import[0].version = mut[1]
    return m.SerializeToString()


def _feeds(model: bytes):
    """Random inputs for the model's declared input, or None when it is unusable or too large."""
    m = onnx.load_from_string(model)
    x = m.graph.input[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else SYMBOLIC_DIM for d in x.shape.dim]
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.float64)) > MAX_ELEMENTS:
        return None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(x.elem_type)
    rng = np.random.default_rng(3)
    data = rng.standard_normal(dims) * 3 if dtype.kind == "f" else rng.integers(0, 5, dims)
    return {m.graph.input[0].name: np.asarray(data).astype(dtype)}


def _output_step(model: bytes) -> float:
    """The output DequantizeLinear's scale of the QDQ base (0 for the float base or a broken scale)."""
    m = onnx.load_from_string(model)
    for t in m.graph.initializer:
        if t.name == "ys":
            try:
                v = float(numpy_helper.to_array(t).reshape(-1)[0])
            except Exception:
                return float("nan")
            return abs(v)
    return 0.0


def _has_non_finite_constants(model: bytes) -> bool:
    """inf/NaN weights or scales: sums then meet inf - inf in an order-dependent way, and the two EPs
    may legitimately disagree on which outputs end up NaN or infinite. Huge finite ones too (beyond
    HUGE_CONSTANT): their squares overflow float32, which a wider accumulator (OptimEP's reductions sum
    in double) does not, so the float32 result and the exact one differ."""
    for t in onnx.load_from_string(model).graph.initializer:
        try:
            a = numpy_helper.to_array(t)
        except Exception:
            continue
        if a.dtype.kind == "f" and not (np.isfinite(a) & (np.abs(a) < HUGE_CONSTANT)).all():
            return True
    return False


def _run_case(model: bytes) -> None:
    """Must return (or raise a Python exception); both EPs succeeding must agree."""
    import onnxruntime as ort

    try:
        sess = session(model)
    except Exception:
        return  # refused with an error: fine
    feeds = _feeds(model)
    if feeds is None:
        return
    try:
        ours = sess.run(None, feeds)
    except Exception:
        return
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ref = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:
        return  # ORT's own EP refuses what OptimEP ran: nothing to compare against
    step = _output_step(model)
    if not np.isfinite(step) or step > 1e6 or _has_non_finite_constants(model):
        return  # fuzzed scales or weights: the results are not comparable (see above)
    for o, r in zip(ours, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        if o.dtype.kind == "f":
            both = np.isfinite(o) & np.isfinite(r)
            np.testing.assert_allclose(o[both], r[both], rtol=FUZZ_TOLERANCE, atol=FUZZ_TOLERANCE + QDQ_STEPS * step)
        else:  # quantized: a step at most
            assert np.abs(o.astype(np.int64) - r.astype(np.int64)).max(initial=0) <= 1


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mutations())
def test_mutated_models_end_in_results_or_errors(case):
    base, muts = case
    _run_case(_mutate(base, muts))


# Cases that once crashed or misbehaved: (base, mutations). Each must now end cleanly.
REGRESSIONS: dict[str, tuple[str, list]] = {
    # A negative output scale (ys = -1): the fused Relu clamped the wrong end of the integer range.
    # Scales that are not positive and finite now keep their float units.
    "negative_output_scale_with_relu": ("qdq", [("init_value", 13, -1.0, 0)]),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regressions(name):
    base, muts = REGRESSIONS[name]
    _run_case(_mutate(base, muts))


def test_unmutated_bases_run_and_agree():
    for base in BASES:
        _run_case(_mutate(base, []))
