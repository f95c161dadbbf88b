"""One OptimEP session shared by many threads: how an application serving requests embeds optim.

    python examples/serve_threads.py model.onnx --threads 4 --requests 200 [--input x:1x3x224x224]
    python examples/serve_threads.py            # a small built-in model

A session is created once (OptimEP compiles its partitions then) and `run` is called concurrently:
ONNX Runtime's InferenceSession.run is thread-safe and OptimEP's kernels are reentrant (per-call
scratch only), so no lock is needed. Each request's result is checked against the same input run
alone, and the throughput is printed. Needs only the runtime: pip install optim (no torch).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import optim
from optim.ep_plugin.inputs import parse_shape, random_inputs


def small_model() -> bytes:
    """Gemm -> Relu -> Gemm with a dynamic batch, random weights: all of it runs on OptimEP."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((64, 32)), "b1": rng.standard_normal(64),
               "w2": rng.standard_normal((10, 64)), "b2": rng.standard_normal(10)}
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
        "serve_threads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="ONNX model (default: a small built-in MLP)")
    parser.add_argument("--threads", type=int, default=4, help="application threads calling run (default 4)")
    parser.add_argument("--requests", type=int, default=200, help="requests in all (default 200)")
    parser.add_argument("--input", action="append", default=[], help="NAME:DIMS for inputs with symbolic dims")
    args = parser.parse_args()

    # One intra-op thread per call: the application's threads are the parallelism.
    sess = optim.session(args.model or small_model(), threads=1)
    print(optim.placement(sess).summary())
    shapes = dict(parse_shape(spec) for spec in args.input) or ({} if args.model else {"x": [8, 32]})
    requests = [random_inputs(sess, shapes, seed=i) for i in range(args.requests)]
    expected = [sess.run(None, feeds) for feeds in requests[: args.threads * 2]]  # a few, run alone

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        results = list(pool.map(lambda feeds: sess.run(None, feeds), requests))
    seconds = time.perf_counter() - start

    for alone, together in zip(expected, results):
        for a, b in zip(alone, together):
            np.testing.assert_array_equal(a, b)  # same input, same bits, whatever ran beside it
    print(f"{args.requests} requests from {args.threads} threads on one session: {seconds * 1e3:.1f} ms, "
          f"{args.requests / seconds:.0f} requests/s; results equal to runs alone")


if __name__ == "__main__":
    main()
