"""bf16 mode (EP option precision=bf16) against float32 on OptimEP, and OpenVINO's bf16, on real-size models.

    .venv/bin/python benchmarks/bf16.py [--models bert_base,vit_b16,minilm,resnet50] [--batch 1,8] [--budget 40]
        [--runs 30] [--min-runs 5] [--threads 2] [--cache benchmarks/.cache] [--no-markdown] [--json out.json]

Each model's optimized float file comes from the real-size suite's cache (realsize_prepare.py: exported and
optimized once). Per batch, in a process of its own (a runtime that crashes ends only that model's run):
OptimEP in float32 and in bf16 and OpenVINO with its inference precision bf16 run alternately within the budget
(medians), and each output is compared with ONNX Runtime's CPU EP in float32: the relative L2 error and the
cosine, so a speed-up never hides what bf16 costs. bf16 covers float MatMul / Gemm with constant weights and
convolutions of one group (AMX-BF16, else AVX512-BF16 kernels); depthwise convolutions, stems and the folded
MobileNet blocks stay float32, as do the activations between ops. Rewrites the bf16 table in
BENCHMARKS.md with the command and the machine. On a CPU without AVX512-BF16 it says so and exits.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import options
import timing
from optim.common.comparison import relative_l2
from optim.common.machine import core_count, cpu_summary
from optim.ep_plugin import cpu_session, session
from optim.ep_plugin.timing import NO_SPIN
from optim.ep_plugin.tools.bench_peers import Peer, PeerFailed
from optim.ep_plugin.tools.doctor import bf16_kernel
from realsize_models import BY_NAME, model_inputs
from realsize_prepare import prepare
from run import HERE, _replace_between

MARKERS = ("<!-- bf16:begin -->", "<!-- bf16:end -->")
DEFAULT_MODELS = "resnet50,mobilenetv2,convnext_tiny,vit_b16,bert_base,minilm,segformer_b0"
SIDES = ("fp32_optim", "bf16_optim", "bf16_openvino")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def one_model(name: str, args) -> dict:
    """This process's model: sessions, errors and timings per batch."""
    say = lambda line: print(f"[{name}] {line}", flush=True)  # noqa: E731
    fp32 = prepare(name, Path(args.cache), say=say, with_int8=False).fp32
    result = {"model": name, "batches": [], "notes": []}
    sessions = {"fp32_optim": session(str(fp32), threads=args.threads, config=NO_SPIN),
                "bf16_optim": session(str(fp32), threads=args.threads, config=NO_SPIN, precision="bf16")}
    try:
        sessions["bf16_openvino"] = Peer("openvino-bf16", str(fp32), args.threads, NO_SPIN)
        result["openvino"] = sessions["bf16_openvino"].description
    except PeerFailed as e:
        result["notes"].append(str(e))
    reference = cpu_session(str(fp32), threads=args.threads)
    for batch in args.batches:
        feeds = model_inputs(name, batch, seed=0)
        ref = reference.run(None, feeds)[0]
        errors = {}
        for side, sess in sessions.items():
            got = sess.run(None, feeds)[0]
            errors[side] = {"rel_l2": relative_l2(got, ref), "cosine": cosine(got, ref)}
        stats, runs = timing.time_within_budget(sessions, feeds, budget_s=args.budget / len(args.batches),
                                                min_runs=args.min_runs, max_runs=args.runs, warmup=args.warmup,
                                                batch=batch)
        row = {"batch": batch, "runs": runs, "errors": errors, "median_ms": {k: v.median_ms for k, v in stats.items()}}
        say(f"batch {batch}: medians (ms) " + "  ".join(f"{k} {v:.2f}" for k, v in row["median_ms"].items()))
        result["batches"].append(row)
    return result


def run_isolated(name: str, args, folder: Path) -> dict:
    out = folder / f"{name}.json"
    cmd = [sys.executable, __file__, "--one", name, "--result", str(out), "--batch", args.batch, "--cache", args.cache,
           *options.timing_argv(args)]
    rc = subprocess.run(cmd).returncode
    if rc == 0 and out.exists():
        return json.loads(out.read_text())
    return {"model": name, "batches": [], "notes": [f"its process exited with status {rc}"]}


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table(results: list[dict]) -> list[str]:
    lines = ["| model | batch | fp32 OptimEP (ms) | bf16 OptimEP (ms) | bf16 speed-up | OpenVINO bf16 (ms) | "
             "OpenVINO bf16 / OptimEP bf16 | rel. L2 vs fp32: OptimEP bf16 / OpenVINO bf16 | cosine: OptimEP bf16 |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for res in results:
        for b in res["batches"]:
            ms, err = b["median_ms"], b["errors"]
            f32, b16, ov = ms.get("fp32_optim"), ms.get("bf16_optim"), ms.get("bf16_openvino")
            lines.append(f"| {BY_NAME[res['model']].label} | {b['batch']} | {_f(f32, '.2f')} | {_f(b16, '.2f')} | "
                         f"{_f(f32 / b16 if f32 and b16 else None, '.2f')} | {_f(ov, '.2f')} | "
                         f"{_f(ov / b16 if ov and b16 else None, '.2f')} | "
                         f"{_f(err['bf16_optim']['rel_l2'], '.1e')} / "
                         f"{_f(err.get('bf16_openvino', {}).get('rel_l2'), '.1e')} | "
                         f"{_f(err['bf16_optim']['cosine'], '.5f')} |")
    return lines


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated (default {DEFAULT_MODELS})")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes (default 1,8)")
    options.add_timing(ap, budget=40.0, budget_for="per model, all batches", runs=30, warmup=2)
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="the real-size suite's cache folder")
    ap.add_argument("--json", help="also write every result to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a model in this process (the parent runs each in its own)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    options.check_timing(ap, args)
    args.names = options.subset(ap, args.models, list(BY_NAME), "model")
    args.batches = [int(b) for b in args.batch.split(",")]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.one:
        Path(args.result).write_text(json.dumps(one_model(args.one, args), indent=2))
        return 0
    kernel = bf16_kernel()
    if kernel is None:
        print("bf16 table skipped: this CPU has no bf16 GEMM for OptimEP (needs AVX512-BF16 or AMX-BF16)", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="optim-bf16-") as tmp:
        results = [run_isolated(name, args, Path(tmp)) for name in args.names]
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    header = ["", f"Command: `.venv/bin/python benchmarks/bf16.py {shown}`  ",
              f"Machine: {cpu_summary()}, {core_count()} cores; {args.threads} intra-op threads (no spinning); "
              f"OptimEP's bf16 GEMM: {kernel}.  ",
              f"Timing: alternating runs within {args.budget:g} s per model, {args.min_runs} to {args.runs} runs per "
              "side; medians. Errors: each side's first output against ONNX Runtime's CPU EP in float32.", ""]
    notes = [f"- {r['model']}: {n}" for r in results for n in r["notes"]]
    lines = [*header, *table(results), "", *notes]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"kernel": kernel, "results": results}, indent=2))
    if not args.no_markdown:
        md = HERE / "BENCHMARKS.md"
        md.write_text(_replace_between(md.read_text(), MARKERS, lines, "bf16 mode (precision=bf16)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
