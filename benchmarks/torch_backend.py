"""PyTorch eager vs torch.compile(backend="inductor") vs torch.compile(backend="optim") in fp32 and int8.

    .venv/bin/python benchmarks/torch_backend.py [--models resnet50,minilm] [--batch 1,8] [--threads 1]
        [--budget 20] [--runs 50] [--min-runs 5] [--warmup 3] [--json out.json] [--merge earlier.json] [--no-markdown]

The real-size suite's models (realsize_models.py: ResNet-50, MobileNetV2, EfficientNet-B0, ViT-B/16,
BERT-base from transformers configs, MiniLM with its weights) at each batch size: every backend compiles
the model afresh (torch._dynamo.reset()), its compile time is the first call's, then all of them run
alternating (A B C D A B ...) within --budget seconds. int8 is calibrated on 8 batches of the suite's
inputs (transformers: MatMuls only, as realsize.py). Outputs are checked against eager (max abs error for
fp32, cosine for int8). Rewrites the table between the torch-backend markers in BENCHMARKS.md.
Run it pinned (`taskset -c 1`) with --threads 1 on a busy machine, or on a quiet one with the cores it has.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

import options
from optim.common.machine import cpu_summary
from realsize_models import MATMUL_ONLY, SUITE, model_inputs
from run import HERE, _replace_between
from timing import time_within_budget

MARKERS = ("<!-- torch-backend:begin -->", "<!-- torch-backend:end -->")
MODELS = ["resnet50", "mobilenetv2", "efficientnet_b0", "vit_b16", "bert_base", "minilm"]
BACKENDS = ["eager", "inductor", "optim", "optim int8"]
CALIBRATION_BATCHES = 8
LABELS = {m.name: m.label for m in SUITE}


def build(name: str) -> torch.nn.Module:
    from optim.models import get

    if name == "minilm":
        from optim.models import minilm

        return minilm.build()
    return get(name).factory()


class _Timed:
    """A compiled callable with the run(None, feeds) that optim's timing helpers call."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def run(self, _outputs, _feeds):
        with torch.no_grad():
            return self.fn(*self.args)


def _compiled(model, backend: str, name: str, batch: int, threads: int):
    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model, backend="inductor")
    opts = {"threads": threads}
    if backend == "optim int8":
        calib = [tuple(torch.from_numpy(v) for v in model_inputs(name, batch, seed=100 + i).values())
                 for i in range(CALIBRATION_BATCHES)]
        opts.update(quantize="int8", calib=calib)
        if name in ("vit_b16", "bert_base", "minilm"):
            opts["op_types"] = list(MATMUL_ONLY)
    return torch.compile(model, backend="optim", options=opts)


def _agreement(backend: str, ours: torch.Tensor, eager: torch.Tensor) -> str:
    ours, eager = ours.double().flatten(), eager.double().flatten()
    if backend == "optim int8":
        return f"cos {float(ours @ eager / (ours.norm() * eager.norm())):.4f}"
    return f"{float((ours - eager).abs().max()):.1e}"


def bench_model(name: str, batch: int, args) -> list[dict]:
    import optim.torch

    torch._dynamo.reset()
    model = build(name).eval()
    inputs = tuple(torch.from_numpy(v) for v in model_inputs(name, batch).values())
    with torch.no_grad():
        reference = model(*inputs)
    rows, timed = [], {}
    for backend in args.backends:
        row = {"model": name, "batch": batch, "backend": backend}
        rows.append(row)
        try:
            fn = _compiled(model, backend, name, batch, args.threads)
            before = optim.torch.last_report().compiles
            t0 = time.perf_counter()
            with torch.no_grad():
                out = fn(*inputs)
            row["compile_s"] = time.perf_counter() - t0 if backend != "eager" else None
            row["agreement"] = _agreement(backend, out, reference) if backend != "eager" else ""
            graphs = optim.torch.last_report().graphs[before:]
            if graphs:
                row["graphs"] = [g.line() for g in graphs]
                row["on_optimep"] = sum(g.placement.optim_nodes for g in graphs if g.placement is not None)
                row["nodes"] = sum(g.placement.total_nodes for g in graphs if g.placement is not None)
            timed[backend] = _Timed(fn, inputs)
        except Exception as e:  # noqa: BLE001 - one backend failing must not end the benchmark
            row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
        print(f"{name} b{batch} {backend}: compiled {row.get('compile_s') or 0:.1f} s {row.get('error', '')}",
              file=sys.stderr, flush=True)
    stats, runs = time_within_budget(timed, {}, budget_s=args.budget, min_runs=args.min_runs, max_runs=args.runs,
                                     warmup=args.warmup, batch=batch)
    for row in rows:
        if row["backend"] in stats:
            row["median_ms"] = stats[row["backend"]].median_ms
            row["runs"] = runs
    eager = next((r.get("median_ms") for r in rows if r["backend"] == "eager"), None)
    for row in rows:
        if eager and row.get("median_ms"):
            row["speedup"] = eager / row["median_ms"]
    return rows


def write_markdown(rows: list[dict], command: str, threads: int) -> None:
    lines = ["", f"Command: `{command}`  ", f"Machine: {cpu_summary()}; torch {torch.__version__}, {threads} "
             "thread(s) for PyTorch and each OptimEP session; medians of alternating runs.", "",
             "| model | batch | backend | median (ms) | vs eager | compile (s) | output vs eager | on OptimEP |",
             "|---|---:|---|---:|---:|---:|---|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {LABELS.get(r['model'], r['model'])} | {r['batch']} | {r['backend']} | failed: "
                         f"{r['error'].replace('|', '/')} | | | | |")
            continue
        median = f"{r['median_ms']:.2f}" if r.get("median_ms") else "-"
        speedup = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        compile_s = f"{r['compile_s']:.1f}" if r.get("compile_s") is not None else ""
        placed = f"{r['on_optimep']}/{r['nodes']}" if r.get("nodes") else ""
        lines.append(f"| {LABELS.get(r['model'], r['model'])} | {r['batch']} | {r['backend']} | {median} | {speedup} | "
                     f"{compile_s} | {r.get('agreement', '')} | {placed} |")
    md = HERE / "BENCHMARKS.md"
    md.write_text(_replace_between(md.read_text(), MARKERS, lines))


def _ordered(rows: list[dict]) -> list[dict]:
    """Rows in the suite's order, then batch, then backend."""
    def key(r):
        return (MODELS.index(r["model"]) if r["model"] in MODELS else len(MODELS), r["batch"],
                BACKENDS.index(r["backend"]) if r["backend"] in BACKENDS else len(BACKENDS))
    return sorted(rows, key=key)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help=f"comma-separated subset of {','.join(MODELS)}")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes (default 1,8)")
    ap.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {','.join(BACKENDS)}")
    options.add_timing(ap, budget=20, budget_for="per model and batch", runs=50, warmup=3)
    ap.add_argument("--json", help="also write every row to this JSON file")
    ap.add_argument("--merge", help="rows of an earlier run's --json: kept for the models and batches not run now")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    options.check_timing(ap, args)
    models = options.subset(ap, args.models, MODELS, "model")
    args.backends = options.subset(ap, args.backends, BACKENDS, "backend")
    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 64  # four backends x batch sizes on one forward
    command = "python benchmarks/torch_backend.py " + " ".join(argv if argv is not None else sys.argv[1:])
    batches = [int(b) for b in args.batch.split(",")]
    kept = []
    if args.merge:
        with open(args.merge, encoding="utf-8") as f:
            kept = [r for r in json.load(f) if not (r["model"] in models and r["batch"] in batches)]
        command += f" (rows of other models from an earlier run: {', '.join(sorted({r['model'] for r in kept}))})"
    fresh, rows = [], []
    for name in models:
        for batch in batches:
            fresh += bench_model(name, batch, args)
            rows = _ordered(fresh + kept)
            # Written after every model and batch: a long run stopped part-way keeps what it measured.
            if args.json:
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump(rows, f, indent=2)
            if not args.no_markdown:
                write_markdown(rows, command.strip(), args.threads)
    for r in rows:
        print(r["model"], r["batch"], r["backend"], f"{r.get('median_ms', float('nan')):.2f} ms",
              f"{r.get('speedup', float('nan')):.2f}x", r.get("error", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
