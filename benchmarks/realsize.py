"""The real-size suite: published architectures at their real size on OptimEP vs ONNX Runtime's CPU EP.

    .venv/bin/python benchmarks/realsize.py [--models resnet18,mobilenetv3_small] [--batch 1,8]
        [--budget 60] [--runs 30] [--min-runs 5] [--threads 2] [--isa auto] [--weight-bits 8]
        [--json out.json] [--no-markdown] [--rebuild]

Each model (realsize_models.py) is exported, optimized and quantized to int8 QDQ with optim's own
library functions, the files cached in benchmarks/.cache/ (a rerun skips those stages), then timed
in fp32 and int8 on OptimEP and on the CPU EP, alternating, at each batch size, within `--budget`
seconds of timed runs per model (at least --min-runs, at most --runs per side). Every model runs
in a child process (realsize_model.py): one that fails or crashes is reported and the rest still
run. The machine's fp32 and int8 peaks are measured first (peak.py); with --isa, shares are of the
peaks of that kernel set (e.g. avx2: the AVX2 FMA and, by --weight-bits, the u8 x s8 or int16-pair
peak). Rewrites the table between the realsize markers in BENCHMARKS.md with the command, the machine
and the peaks; a run with other kernels or weights has markers of its own (realsize-avx2-w7...), as has a run
on a CPU without AVX-512, one pair per cpuid family and model (realsize-avx2host-f25m1-w8: there the CPU EP runs
AVX2 too), and a section at the end of the file the first time.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnxruntime as ort

import options
import realsize_report
from optim.common.machine import core_count, cpu_flags, cpu_id, cpu_model, cpu_summary
from peak import measure as measure_peak
from realsize_models import SUITE
from run import HERE, _replace_between

MARKERS = ("<!-- realsize:begin -->", "<!-- realsize:end -->")
WORKER = HERE / "realsize_model.py"
# A model's process gets this long on top of its timing budget (export, optimize and quantize of
# the biggest models take a few minutes on 2 cores) before it is stopped and reported as hung.
PREPARE_ALLOWANCE_S = 1800


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [m.name for m in SUITE]
    ap.add_argument("--models", help=f"comma-separated subset of: {', '.join(names)} (default: all)")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes (default 1,8)")
    options.add_timing(ap, budget=60.0, budget_for="per model, all batches", runs=30, warmup=2)
    options.add_kernels(ap)
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder of the cached ONNX files and the peak program")
    ap.add_argument("--rebuild", action="store_true", help="export, optimize and quantize again even if cached")
    ap.add_argument("--json", help="also write every result to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    options.check_timing(ap, args)
    args.names = options.subset(ap, args.models, names, "model")
    return args


def _worker_command(name: str, result: Path, args) -> list[str]:
    cmd = [sys.executable, str(WORKER), name, "--result", str(result), "--batch", args.batch, "--cache", args.cache,
           *options.timing_argv(args), *options.kernels_argv(args)]
    return cmd + (["--rebuild"] if args.rebuild else [])


def _ended(rc: int | None) -> str:
    if rc is None:
        return "was stopped after its time allowance"
    if rc < 0:
        return f"was killed by signal {signal.Signals(-rc).name}"
    return f"exited with status {rc}"


def run_model(name: str, args, folder: Path) -> dict:
    """One model's result from its own process; a crash or hang becomes a failure naming the stage."""
    result_path = folder / f"{name}.json"
    try:
        rc = subprocess.run(_worker_command(name, result_path, args), timeout=args.budget * 4 + PREPARE_ALLOWANCE_S).returncode
    except subprocess.TimeoutExpired:
        rc = None
    result = json.loads(result_path.read_text()) if result_path.exists() else {"model": name, "stage": "starting",
                                                                              "failures": [], "batches": []}
    if rc != 0 or result["stage"] != "done":
        result["failures"].append({"stage": result["stage"], "error": f"the model's process {_ended(rc)}"})
        print(f"[{name}] FAILED: its process {_ended(rc)} during {result['stage']}", flush=True)
    return result


def avx2_host(args) -> bool:
    """Whether this run is OptimEP's AVX2 kernels on a CPU without AVX-512, where the CPU EP runs AVX2 too: the one
    kind of run whose CPU EP columns are an AVX2 host's (forced to avx2 elsewhere, only OptimEP's side is)."""
    flags = cpu_flags()
    return flags["avx2"] and not flags["avx512f"] and args.isa in ("auto", "avx2")


def host_tag() -> str:
    """The cpuid family and model as a marker's part ("f25m1"), so that each AVX2-only CPU keeps its own table."""
    words = (cpu_id() or "").split()  # "family 25 model 1"
    return f"f{words[1]}m{words[3]}" if len(words) == 4 else "unknown"


def markers(args) -> tuple[str, str]:
    """The BENCHMARKS.md markers of a run's table: the default kernels and weights, or its own pair."""
    if avx2_host(args):
        tag = f"realsize-avx2host-{host_tag()}-w{args.weight_bits}"
    elif args.isa == "auto" and args.weight_bits == 8:
        return MARKERS
    else:
        tag = f"realsize-{args.isa}-w{args.weight_bits}"
    return f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"


def heading(args) -> str:
    """The section heading a run's table gets the first time (its markers' own section at the end of the file)."""
    if avx2_host(args):
        return (f"Real-size models on an AVX2-only host ({cpu_model()}, {cpu_id() or 'cpuid unknown'}; no AVX-512: "
                f"OptimEP and the CPU EP on AVX2), {args.weight_bits}-bit int8 weights")
    return f"Real-size models with OptimEP's kernels forced to {args.isa}, {args.weight_bits}-bit int8 weights"


def machine(args, peak) -> dict:
    return {"cpu": cpu_summary(), "cores": core_count(), "onnxruntime": ort.__version__,
            "python": platform.python_version(), "threads": args.threads, "isa": args.isa,
            "weight_bits": args.weight_bits, "peak": peak.__dict__}


def header(args, mach: dict, peak, command: str) -> list[str]:
    return ["", f"Command: `{command.strip()}`  ",
            f"Machine: {mach['cpu']}, {mach['cores']} cores; onnxruntime {mach['onnxruntime']}; {args.threads} intra-op "
            f"threads per session (no spinning).  ",
            f"OptimEP's kernels: {args.isa}; int8 models with {args.weight_bits}-bit weights.  ",
            f"Peak ({peak.threads} threads, measured by peak_fma.cc): fp32 {peak.fp32_gflops:.0f} GFLOP/s "
            f"({peak.fp32_kernel}), int8 {peak.int8_gops:.0f} GOP/s ({peak.int8_kernel}).  ",
            f"Timing: after {args.warmup} warm-up runs per session, alternating runs of the four sessions within "
            f"{args.budget:g} s per model, {args.min_runs} to {args.runs} runs per side; medians.", ""]


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    peak = measure_peak(Path(args.cache), args.threads).for_isa(args.isa, args.weight_bits)
    mach = machine(args, peak)
    print(f"{mach['cpu']}, {mach['cores']} cores; {peak.describe()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="optim-realsize-") as tmp:
        for name in args.names:
            print(f"[{name}] starting ({time.perf_counter() - t0:.0f} s into the suite)", flush=True)
            results.append(run_model(name, args, Path(tmp)))
    rows = [r for res in results for r in realsize_report.figures(res, peak)]
    for p, (g, n) in realsize_report.geomeans(rows).items():
        print(f"geometric mean of CPU EP / OptimEP ({p}): {'-' if g is None else f'{g:.2f}'} over {n} model-batch pairs")
    print(f"suite done in {time.perf_counter() - t0:.0f} s", flush=True)
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    command = f".venv/bin/python benchmarks/realsize.py {shown}"
    if shown == "--json benchmarks/realsize.json":  # what `make bench` runs
        command = f"make bench  # = {command}"
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": mach, "command": command, "results": results, "rows": rows},
                                              indent=2))
    if not args.no_markdown:
        md = HERE / "BENCHMARKS.md"
        lines = realsize_report.markdown(results, rows, header(args, mach, peak, command))
        md.write_text(_replace_between(md.read_text(), markers(args), lines, heading(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
