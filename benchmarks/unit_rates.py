"""The rate of each of OptimEP's steps in a model: `optim profile`'s rows with their multiply-adds, GFLOP/s or GOP/s,
and the share of the measured peak of the kernel set, so a layer that runs far below the machine's peak shows.

    .venv/bin/python benchmarks/unit_rates.py MODEL.onnx [--batch 1] [--threads 2] [--isa auto] [--runs 20]
        [--int8] [--weight-bits 8] [--top 40]

A step's multiply-adds are those of the model's Conv / ConvTranspose / MatMul / Gemm nodes it names (flops.py, at
the profiled input shapes); steps without any (pooling, softmax, a lone QAdd) are summed in one line. The peak is
peak_fma.cc's for the kernel set (fp32, or int8 with --int8), on the threads given. Rates are of one profiled
run (both profilers on): use them for shares, `optim bench` for latency. Nothing is written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import onnx

from flops import count_macs
from optim.common.machine import cpu_summary
from optim.ep_plugin.tools.profile import profile
from peak import measure as measure_peak

HERE = Path(__file__).resolve().parent
_NAMED = re.compile(r"'([^']+)'")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="an ONNX model (float, or int8 QDQ)")
    ap.add_argument("--batch", type=int, default=1, help="every input's first dim (default 1)")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads, and the peak's (default 2)")
    ap.add_argument("--isa", default="auto", help="OptimEP's kernel set (its `isa` option; default auto)")
    ap.add_argument("--runs", type=int, default=20, help="profiled runs (default 20)")
    ap.add_argument("--int8", action="store_true", help="shares of the int8 peak (default: the fp32 one)")
    ap.add_argument("--weight-bits", type=int, default=8, choices=[8, 7], help="the int8 weights' bits, for the int8 peak")
    ap.add_argument("--top", type=int, default=40, help="rows to print, largest first (0: all)")
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder for the compiled peak program")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not Path(args.model).is_file():
        print(f"unit_rates: no such model: {args.model}", file=sys.stderr)
        return 2
    peak = measure_peak(Path(args.cache), args.threads).for_isa(args.isa, args.weight_bits)
    top, unit = (peak.int8_gops, "GOP/s") if args.int8 else (peak.fp32_gflops, "GFLOP/s")
    prof = profile(args.model, batch=args.batch, runs=args.runs, threads=args.threads, isa=args.isa)
    model = onnx.load(args.model)
    dtypes = {i.name: onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type) for i in model.graph.input}
    feeds = {k: np.zeros(v, dtypes.get(k, np.float32)) for k, v in prof.inputs.items()}
    macs = count_macs(model, feeds).by_node
    print(f"{cpu_summary()}; {peak.describe()}; kernels: {prof.isa}; inputs {prof.inputs}")
    print(f"a profiled run took {prof.run_mean_ms:.3f} ms; shares of {top:.0f} {unit}")
    rated, rest_ms = [], 0.0
    for row in prof.rows:
        n = sum(macs.get(name, 0) for name in _NAMED.findall(row.nodes))
        if n and row.mean_ms > 0:
            rated.append((row, 2 * n))
        else:
            rest_ms += row.mean_ms
    shown = rated if args.top == 0 else rated[: args.top]
    print(f"{'ms/run':>8} {'share':>6} {unit:>8} {'of peak':>7}  {'kernel':<28} step")
    for row, ops in shown:
        rate = ops / row.mean_ms / 1e6
        print(f"{row.mean_ms:8.3f} {row.share:6.1%} {rate:8.0f} {rate / top:7.0%}  {row.kernel[:28]:<28} {row.nodes}")
    if len(rated) > len(shown):
        print(f"... {len(rated) - len(shown)} more rated row(s) (--top 0 shows all)")
    rated_ms = sum(r.mean_ms for r, _ in rated)
    if rated_ms > 0:
        rate = sum(ops for _, ops in rated) / rated_ms / 1e6
        print(f"steps with multiply-adds: {rated_ms:.3f} ms at {rate:.0f} {unit} ({rate / top:.0%} of peak); "
              f"the other rows: {rest_ms:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
