"""The project's benchmark suite: the zoo on OptimEP vs ONNX Runtime's CPU EP, side by side.

    .venv/bin/python benchmarks/run.py [--runs 50] [--threads 2] [--batch 1,16] [--json out.json]

Exports each zoo model (needs torch), then for each batch size times OptimEP and the CPU EP (ORT's
default, all graph optimizations) in alternation, A B A B, so that drift hits both equally. Reports
medians, p90 and the ratio CPU-EP median / OptimEP median (> 1: OptimEP is faster), and rewrites the
table between the markers in benchmarks/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from optim.ep_plugin import cpu_session, placement, session
from optim.models import ZOO, example_inputs

HERE = Path(__file__).resolve().parent
TABLE_BEGIN = "<!-- fp32-zoo:begin -->"
TABLE_END = "<!-- fp32-zoo:end -->"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def batch_inputs(name: str, batch: int) -> dict[str, np.ndarray]:
    parts = [example_inputs(name, seed=i) for i in range(batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def time_pair(sessions: dict[str, ort.InferenceSession], feeds, runs: int, warmup: int) -> dict[str, list[float]]:
    for s in sessions.values():
        for _ in range(warmup):
            s.run(None, feeds)
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(runs):
        for k, s in sessions.items():  # alternate: A B A B ...
            t0 = time.perf_counter()
            s.run(None, feeds)
            times[k].append(time.perf_counter() - t0)
    return times


def summarize(ts: list[float]) -> dict[str, float]:
    ms = sorted(t * 1e3 for t in ts)
    return {"median_ms": statistics.median(ms), "p90_ms": ms[int(0.9 * (len(ms) - 1))], "min_ms": ms[0],
            "cv": statistics.pstdev(ms) / statistics.mean(ms)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", default="1,16", help="comma-separated batch sizes")
    ap.add_argument("--json", help="also write all results to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batch.split(",")]

    from optim.exporter import export  # torch only here: running models never needs it

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ZOO:
            path = export(name, Path(tmp) / f"{name}.onnx").path
            optim_sess = session(str(path), threads=args.threads)
            cpu_sess = cpu_session(str(path), threads=args.threads)
            p = placement(optim_sess)
            for batch in batches:
                feeds = batch_inputs(name, batch)
                t = time_pair({"optim": optim_sess, "cpu": cpu_sess}, feeds, args.runs, args.warmup)
                o, c = summarize(t["optim"]), summarize(t["cpu"])
                rows.append({"model": name, "batch": batch, "optim": o, "cpu": c,
                             "ratio": c["median_ms"] / o["median_ms"],
                             "placement": f"{p.optim_nodes}/{p.total_nodes}"})
                print(f"{name:12s} batch {batch:3d}  OptimEP {o['median_ms']:8.3f} ms  CPU EP {c['median_ms']:8.3f} ms  "
                      f"ratio {rows[-1]['ratio']:.2f}  (cv {o['cv']:.2f}/{c['cv']:.2f})", flush=True)

    command = "make bench  # = .venv/bin/python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "onnxruntime": ort.__version__,
               "python": platform.python_version(), "threads": args.threads, "runs": args.runs}
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "command": command, "rows": rows}, indent=2))
    if not args.no_markdown:
        write_markdown(rows, machine, command)
    return 0


def write_markdown(rows, machine, command) -> None:
    lines = [TABLE_BEGIN, "",
             f"Command: `{command.strip()}`  ",
             f"Machine: {machine['cpu']}, {machine['cores']} cores; onnxruntime {machine['onnxruntime']}, "
             f"{machine['threads']} intra-op threads, {machine['runs']} alternating runs per side (after warm-up).",
             "",
             "| model | batch | on OptimEP | OptimEP median (ms) | CPU EP median (ms) | ratio CPU/OptimEP | OptimEP p90 | CPU EP p90 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['placement']} | {r['optim']['median_ms']:.3f} | "
                     f"{r['cpu']['median_ms']:.3f} | {r['ratio']:.2f} | {r['optim']['p90_ms']:.3f} | {r['cpu']['p90_ms']:.3f} |")
    lines += ["", TABLE_END]
    md = HERE / "BENCHMARKS.md"
    text = md.read_text()
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    md.write_text(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    sys.exit(main())
