"""int8 GEMM throughput: one QDQ MatMul unit (uint8 activations x int8 per-channel weights, requantized
to uint8) on OptimEP vs ONNX Runtime's CPU EP, which fuses the same file into its own u8s8 kernels.

    .venv/bin/python benchmarks/gemm.py [--runs 30] [--threads 2] [--no-markdown]

Shapes: MiniLM's projection and FFN MatMuls at sequence 128, and a large square one. Reports the
median latency of each side (alternating runs), the throughput in GOP/s (2*M*N*K per run) and each
side's share of the fastest int8 GEMM measured here, our stand-in for this machine's int8 ceiling.
Rewrites the table between the int8-gemm markers in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS threads would spin on the cores being timed
import sys
from pathlib import Path

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import HERE, _header, _replace_between, time_stats  # noqa: E402

from optim.common.machine import core_count, cpu_summary  # noqa: E402
from optim.ep_plugin import cpu_session, placement, session  # noqa: E402
from optim.ep_plugin.timing import NO_SPIN  # noqa: E402

MARKERS = ("<!-- int8-gemm:begin -->", "<!-- int8-gemm:end -->")
SHAPES = [(128, 384, 384), (128, 384, 1536), (128, 1536, 384), (512, 1024, 1024)]  # (M, K, N)


def qdq_matmul(m: int, k: int, n: int) -> bytes:
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, size=(k, n)).astype(np.int8)
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128), "w": w,
             "ws": rng.uniform(0.002, 0.01, n).astype(np.float32), "ys": np.float32(0.05 * np.sqrt(k) / 16),
             "yz": np.uint8(128)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"], axis=1),
             helper.make_node("MatMul", ["xf", "wf"], ["yf"]),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_matmul", [helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10).SerializeToString()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-markdown", action="store_true")
    args = ap.parse_args(argv)
    kw = {"threads": args.threads, "config": NO_SPIN}
    rows = []
    for m, k, n in SHAPES:
        model = qdq_matmul(m, k, n)
        sessions = {"optim": session(model, **kw), "cpu": cpu_session(model, **kw)}
        assert placement(sessions["optim"]).integer_units == 1
        x = np.random.default_rng(1).integers(0, 256, (m, k)).astype(np.uint8)
        st = time_stats(sessions, {"x": x}, args.runs, 5, batch=1)
        gops = {name: 2 * m * n * k / (s["median_ms"] * 1e-3) / 1e9 for name, s in st.items()}
        rows.append({"shape": (m, k, n), "ms": {k2: s["median_ms"] for k2, s in st.items()}, "gops": gops})
        print(f"M={m} K={k} N={n}: OptimEP {gops['optim']:.0f} GOP/s, CPU EP {gops['cpu']:.0f} GOP/s", flush=True)
    ceiling = max(g for r in rows for g in r["gops"].values())
    print(f"fastest measured: {ceiling:.0f} GOP/s")
    if not args.no_markdown:
        command = "make bench  # = .venv/bin/python benchmarks/gemm.py " + " ".join(argv if argv is not None else sys.argv[1:])
        machine = {"cpu": cpu_summary(), "cores": core_count(), "onnxruntime": ort.__version__, "threads": args.threads,
                   "runs": args.runs}
        lines = _header(machine, command) + [
            "| M x K x N | OptimEP median (ms) | CPU EP median (ms) | OptimEP GOP/s | CPU EP GOP/s | ratio CPU/OptimEP | "
            "OptimEP share of the fastest |", "|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            m, k, n = r["shape"]
            lines.append(f"| {m} x {k} x {n} | {r['ms']['optim']:.3f} | {r['ms']['cpu']:.3f} | {r['gops']['optim']:.0f} | "
                         f"{r['gops']['cpu']:.0f} | {r['ms']['cpu'] / r['ms']['optim']:.2f} | {r['gops']['optim'] / ceiling:.0%} |")
        md = HERE / "BENCHMARKS.md"
        md.write_text(_replace_between(md.read_text(), MARKERS, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
