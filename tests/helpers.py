"""Shared test helpers: build tiny ONNX models, run them on ORT's CPU EP and on OptimEP, compare."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from optim.common.comparison import FLOAT_ATOL, FLOAT_RTOL, Tolerance, compare_output
from optim.ep_plugin import ISAS as ALL_ISAS, cpu_session, session
from optim.ep_plugin.tools.doctor import isa_supported as kernels_supported

# "fallback disabled" refusals are expected in tests; keep ORT's own error log off stderr.
ort.set_default_logger_severity(4)

# Float results within the named float tolerance (FLOAT_ATOL, FLOAT_RTOL): kernels reorder sums (blocked
# GEMM, FMA), so results differ from ORT's in the last bits; element-wise data movement and max/relu are
# compared exactly (atol=rtol=0).

# Every kernel set this CPU runs: scalar and AVX2 always (the machines have AVX2), AVX-VNNI, AVX-512 VNNI and AMX
# where present.
ISAS = ["scalar", "avx2"] + [isa for isa in ALL_ISAS[2:] if kernels_supported(isa)]
IR_VERSION = 10  # onnxruntime 1.31 reads IR <= 13; onnx 1.23 writes 14 by default

_NP_TO_ONNX = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64,
               np.int32: TensorProto.INT32, np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def tensor_info(name: str, dtype, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, _NP_TO_ONNX[np.dtype(dtype).type], shape)


def make_model(nodes, inputs: dict, outputs: list[str], initializers: dict | None = None, opset: int = 17) -> bytes:
    """inputs: name -> (dtype, shape); outputs: names (type/shape inferred); initializers: name -> array."""
    graph = helper.make_graph(
        nodes,
        "test",
        [tensor_info(n, dt, shape) for n, (dt, shape) in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def run_cpu(model: bytes, feeds: dict) -> list[np.ndarray]:
    """The reference: ORT's CPU EP with graph optimizations off (no fusions that change rounding)."""
    return cpu_session(model, optimization="disable").run(None, feeds)


def run_optim(model: bytes, feeds: dict, isa: str = "auto", **options) -> list[np.ndarray]:
    """OptimEP with CPU fallback disabled: fails if any node is left to the CPU EP."""
    return session(model, fallback=False, isa=isa, **options).run(None, feeds)


def step_kernels(model: bytes, isa: str, **options) -> list[str]:
    """The kernel each OptimEP step chose when it compiled (the step profile's "kernel"; steps that name none left
    out), in step order: which integer GEMM an int8 unit runs on, or the bf16 GEMM (options: EP options)."""
    import gc
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "steps.json"
        sess = session(model, fallback=False, isa=isa, profile=str(path), **options)  # written at compile time
        doc = json.loads(path.read_text())
        del sess
        gc.collect()
    return [s["kernel"] for p in doc["partitions"] for s in p["steps"] if s["kernel"]]


def step_ops(labels: list[str]) -> list[str]:
    """The op type of each compiled step (its label's first word). A stem convolution that reads the partition's
    channels-first input itself (rewrites/nchw_stem.cc, "ToNhwc 'x' + NhwcConv 'c' ...", for an integer stem maybe
    after the "QuantizeLinear 'q'" it took in) counts as the steps it stands for, so layout tests read the same
    either way."""
    ops = []
    for label in labels:
        parts = label.split(" + ")
        taken_in = ["QuantizeLinear"] if parts[0].startswith("QuantizeLinear ") and len(parts) > 2 else []
        parts = parts[len(taken_in):]
        host = parts[1].split(" ")[0] if len(parts) > 1 else ""
        if parts[0].startswith("ToNhwc ") and host in ("NhwcConv", "NhwcQConv"):
            ops += taken_in + ["ToNhwc", host]
        else:
            ops.append(label.split(" ")[0])
    return ops


def run_folded_and_apart(model: bytes, apart_model: bytes, feeds: dict, isa: str, folded_step, **options) -> np.ndarray:
    """A rewrite that folds one step into another, checked the same way everywhere: `model` on OptimEP must have a
    step for which folded_step(label) holds, `apart_model` (the same graph with the folded value kept as a graph
    output, which no fold touches) none, and their first outputs the same bytes. Returns the folded output.
    options: EP options of both sessions."""
    from optim.ep_plugin import placement

    folded = session(model, fallback=False, isa=isa, **options)
    apart = session(apart_model, fallback=False, isa=isa, **options)
    steps = [s for ss in placement(folded).compiled.values() for s in ss]
    assert any(folded_step(s) for s in steps), steps
    apart_steps = [s for ss in placement(apart).compiled.values() for s in ss]
    assert not any(folded_step(s) for s in apart_steps), apart_steps
    got = folded.run(None, feeds)[0]
    np.testing.assert_array_equal(got, apart.run(None, feeds)[0], err_msg=f"on {isa}")
    return got


def assert_close(ours: np.ndarray, ref: np.ndarray, atol: float = FLOAT_ATOL, rtol: float = FLOAT_RTOL, what: str = ""):
    """Shape, dtype, NaN and infinity positions equal; values within atol + rtol*|ref| (integers equal);
    a failure names the worst element with max_abs and max_rel."""
    check = compare_output(what, ours, ref, Tolerance(atol, rtol), labels=("ours", "ref"))
    assert check.passed, f"{what}: {check.problem}; max_abs={check.max_abs:.3g} max_rel={check.max_rel:.3g}"


def requantize(acc: np.ndarray, x_scale, w_scale, y_scale, y_zero, lo: int, hi: int, bias=None,
               channel_axis: int = -1) -> np.ndarray:
    """OptimEP's int8 epilogue (kernel_table.h QgemmEpilogue) in numpy float32: exact int32 sums times
    x_scale * w_scale / y_scale (per output channel along `channel_axis`), plus the real bias / y_scale,
    rounded half to even, plus the zero point, saturated to [lo, hi]. Returns float32 integers."""
    y_scale = np.float32(y_scale)
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    scale = ((np.float32(x_scale) * np.asarray(w_scale, np.float32)).astype(np.float32) / y_scale).astype(np.float32)
    real = acc.astype(np.int32).astype(np.float32) * scale.reshape(shape) if scale.ndim else \
        acc.astype(np.int32).astype(np.float32) * scale
    if bias is not None:
        real = real + (np.asarray(bias, np.float32) / y_scale).astype(np.float32).reshape(shape)
    return np.clip(np.rint(real.astype(np.float32)) + np.float32(y_zero), lo, hi)


def rand(rng: np.random.Generator, *shape, low: float | None = None) -> np.ndarray:
    x = np.asarray(rng.standard_normal(shape), dtype=np.float32)
    return np.asarray(np.abs(x) + np.float32(low), dtype=np.float32) if low is not None else x


def model_with_cpu_fallback(rng: np.random.Generator) -> bytes:
    """Conv+Relu -> Hardmax -> Conv -> Shrink, dynamic batch: two OptimEP partitions (Conv 'c1' + Relu 'r1',
    Conv 'c2') around Hardmax 'hm', and Shrink 'sh' after them: two ops rare enough that OptimEP leaves them
    to the CPU EP."""
    n = helper.make_node
    return make_model(
        [n("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"], name="r1"),
         n("Hardmax", ["r1"], ["hm"], name="hm", axis=1),
         n("Conv", ["hm", "w2"], ["c2"], name="c2", pads=[1, 1, 1, 1]), n("Shrink", ["c2"], ["y"], name="sh", lambd=0.5)],
        {"x": (np.float32, ["batch", 3, 32, 32])}, ["y"],
        {"w1": rand(rng, 8, 3, 3, 3), "b1": rand(rng, 8), "w2": rand(rng, 8, 8, 3, 3)})
