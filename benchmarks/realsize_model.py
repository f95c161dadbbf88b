"""One model of the real-size suite, end to end, in a process of its own.

    .venv/bin/python benchmarks/realsize_model.py resnet18 --result r.json [--batch 1,8] [--budget 60]
        [--runs 30] [--min-runs 5] [--warmup 2] [--threads 2] [--isa auto] [--weight-bits 8]
        [--cache benchmarks/.cache] [--rebuild]

Prepares the model (export, optimize, quantize; cached, see realsize_prepare.py), opens four sessions
(fp32 and int8, each on OptimEP and on ONNX Runtime's CPU EP), checks every output against the fp32 CPU
EP's, and for each batch times the four in alternation (A B C D A B C D ...) within its share of the
time budget. realsize.py runs this once per model: a model that crashes the process (a native crash
in a kernel included) ends only its own run. The result file is rewritten after every stage, with
`stage` saying where it is, so a crash still leaves what was measured and where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch's OpenMP threads must not spin after export
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS threads would spin on the cores being timed

import onnx  # noqa: E402

from flops import count_macs  # noqa: E402
from optim.common.comparison import relative_l2  # noqa: E402
from optim.common.staging import staged_output  # noqa: E402
from optim.ep_plugin import cpu_session, placement, session  # noqa: E402
from optim.ep_plugin.timing import NO_SPIN  # noqa: E402
from realsize_models import BY_NAME, model_inputs  # noqa: E402
from realsize_prepare import PrepareError, prepare  # noqa: E402
import options  # noqa: E402
import timing  # noqa: E402

HERE = Path(__file__).resolve().parent
REFERENCE = "fp32_cpu"  # every output is compared with this session's
TIMING_SEED = 0


class Record:
    """The result file: a dict rewritten atomically on every update."""

    def __init__(self, path: Path, model: str):
        self.path = path
        self.data: dict = {"model": model, "stage": "starting", "failures": [], "batches": []}

    def update(self, **fields) -> None:
        self.data.update(fields)
        with staged_output(self.path) as tmp:
            tmp.write_text(json.dumps(self.data, indent=2))

    def fail(self, stage: str, error: str, say) -> None:
        say(f"FAILED at {stage}: {error}")
        self.data["failures"].append({"stage": stage, "error": error})
        self.update()


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()}"


def open_sessions(files: dict[str, Path], threads: int, record: Record, say, isa: str = "auto") -> dict:
    """fp32/int8 x OptimEP/CPU EP sessions for the files there are; a session that fails is recorded and left out.
    isa: OptimEP's kernel set."""
    makers = {"optim": lambda p: session(str(p), threads=threads, config=NO_SPIN, isa=isa),
              "cpu": lambda p: cpu_session(str(p), threads=threads, config=NO_SPIN)}
    sessions = {}
    for precision, path in files.items():
        for side, make in makers.items():
            name = f"{precision}_{side}"
            record.update(stage=f"session {name}")
            try:
                sessions[name] = make(path)
            except Exception as e:  # noqa: BLE001 - reported per session, the others still run
                record.fail(f"session {name}", _error(e), say)
    return sessions


def placement_summary(sess, precision: str) -> dict:
    """Node counts, ISA and the nodes left to the CPU EP; for int8, also the MatMul/Conv units run in float."""
    d = placement(sess).to_dict()
    keys = ["total_nodes", "optim_nodes", "isa", "integer_units", "fallback"] + (["float_units"] if precision == "int8" else [])
    return {k: d[k] for k in keys}


def check_outputs(sessions: dict, feeds: dict, batch: int, record: Record, say) -> dict[str, float]:
    """Runs each session once (its first warm-up run too); relative L2 error of each output vs REFERENCE.
    A session that fails to run is recorded and removed from `sessions`."""
    outputs = {}
    for name in list(sessions):
        record.update(stage=f"batch {batch}: first run of {name}")
        try:
            outputs[name] = sessions[name].run(None, feeds)[0]
        except Exception as e:  # noqa: BLE001
            record.fail(f"batch {batch}: run {name}", _error(e), say)
            del sessions[name]
    ref = outputs.get(REFERENCE)
    return {} if ref is None else {k: relative_l2(v, ref) for k, v in outputs.items() if k != REFERENCE}


def measure_batch(name: str, batch: int, fp32: onnx.ModelProto, sessions: dict, args, record: Record, say) -> dict:
    feeds = model_inputs(name, batch, seed=TIMING_SEED)
    macs = count_macs(fp32, feeds)
    live = dict(sessions)  # a session that fails at this batch stays for the next
    errors = check_outputs(live, feeds, batch, record, say)
    row = {"batch": batch, "macs": macs.total, "macs_by_op": macs.by_op, "uncounted": macs.uncounted,
           "rel_l2_vs_fp32_cpu": errors, "stats": {}, "runs": 0}
    if not live:
        return row
    record.update(stage=f"batch {batch}: timing {', '.join(live)}")
    try:
        # The first run above was each session's first warm-up run.
        stats, runs = timing.time_within_budget(live, feeds, budget_s=args.budget / len(args.batches),
                                                min_runs=args.min_runs, max_runs=args.runs,
                                                warmup=max(0, args.warmup - 1), batch=batch)
    except Exception as e:  # noqa: BLE001
        record.fail(f"batch {batch}: timing", _error(e), say)
        return row
    row.update(stats={k: asdict(v) for k, v in stats.items()}, runs=runs)
    ms = "  ".join(f"{k} {v.median_ms:.2f}" for k, v in stats.items())
    say(f"batch {batch}: {runs} runs per side, medians (ms): {ms}")
    return row


def prepared_files(name: str, args, record: Record, say) -> dict[str, Path] | None:
    """The model's fp32 (and, when quantizing worked, int8) files, prepared or from the cache, recorded with
    their stages; None when the export failed (recorded, and the record marked done: the process ends normally)."""
    record.update(stage="prepare")
    try:
        prepared = prepare(name, Path(args.cache), say=say, rebuild=args.rebuild,
                           weight_bits=getattr(args, "weight_bits", 8))
    except PrepareError as e:
        record.fail(e.stage, e.message, say)
        record.update(stage="done")
        return None
    record.update(prepare=prepared.stages, folder=str(prepared.folder), fp32_file=prepared.fp32.name,
                  failures=record.data["failures"] + prepared.failures)
    return {"fp32": prepared.fp32, **({"int8": prepared.int8} if prepared.int8 else {})}


def model_say(name: str):
    """say(line) for one model's process: printed at once, prefixed with the model's name."""
    return lambda line: print(f"[{name}] {line}", flush=True)


def prepared_sessions(args):
    """(record, say, files, sessions) for args.model: prepared, its sessions open on args.threads threads and their
    placement recorded; None when the export failed (recorded)."""
    say = model_say(args.model)
    record = Record(Path(args.result), args.model)
    files = prepared_files(args.model, args, record, say)
    if files is None:
        return None
    sessions = open_sessions(files, args.threads, record, say, isa=getattr(args, "isa", "auto"))
    record.update(placement={p: placement_summary(sessions[f"{p}_optim"], p) for p in files if f"{p}_optim" in sessions})
    for p, info in record.data["placement"].items():
        say(f"{p} on OptimEP: {info['optim_nodes']}/{info['total_nodes']} nodes, {info['integer_units']} integer units")
    return record, say, files, sessions


def run(args) -> int:
    name = args.model
    started = prepared_sessions(args)
    if started is None:
        return 0
    record, say, files, sessions = started
    fp32 = onnx.load(str(files["fp32"]))
    for batch in args.batches:
        row = measure_batch(name, batch, fp32, sessions, args, record, say)
        record.update(batches=record.data["batches"] + [row])
    record.update(stage="done")
    return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(BY_NAME))
    ap.add_argument("--result", required=True, help="JSON file to write the result to")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes (default 1,8)")
    options.add_timing(ap, budget=60.0, budget_for="for this model, all batches", runs=30, warmup=2)
    options.add_kernels(ap)
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder of the cached ONNX files")
    ap.add_argument("--rebuild", action="store_true", help="export, optimize and quantize again even if cached")
    args = ap.parse_args(argv)
    options.check_timing(ap, args)
    args.batches = [int(b) for b in args.batch.split(",")]
    if any(b < 1 for b in args.batches):
        ap.error("batch sizes must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except Exception:  # the parent reports it with the stage; the traceback helps whoever fixes it
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
