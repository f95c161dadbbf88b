"""The coverage table: how much of each public architecture runs on OptimEP, and why the rest does not.

    .venv/bin/python benchmarks/coverage.py [--models crnn,resnet18] [--cache benchmarks/.cache] [--rebuild]
        [--json out.json] [--no-markdown]

The models are the real-size suite (realsize_models.SUITE) and speech/OCR architectures at small sizes
(SPEECH_OCR: a Whisper-style encoder, a Wav2Vec2-style model, a CRNN), all with random weights and no download.
Each goes through optim's pipeline (export, optimize, quantize; cached in benchmarks/.cache/ with the real-size
suite) and runs once in fp32 and int8 on OptimEP and on the CPU EP, in a process of its own (coverage_model.py).
Writes benchmarks/COVERAGE.md: per model the nodes and the share on OptimEP in fp32 and int8, the error against
the CPU EP, and every node still on the CPU EP with OptimEP's reason. A coverage check, not a speed test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnxruntime as ort

import coverage_report
import options
from optim.common.machine import core_count, cpu_summary
from realsize import _ended
from realsize_models import SPEECH_OCR, SUITE

HERE = Path(__file__).resolve().parent
WORKER = HERE / "coverage_model.py"
MODELS = [m.name for m in SUITE + SPEECH_OCR]
# A model's process gets this long: exporting, optimizing and quantizing the largest (BERT-base) takes minutes.
ALLOWANCE_S = 1800


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)} (default: all)")
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder of the cached ONNX files")
    ap.add_argument("--rebuild", action="store_true", help="export, optimize and quantize again even if cached")
    ap.add_argument("--json", help="also write every result to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite COVERAGE.md")
    args = ap.parse_args(argv)
    args.names = options.subset(ap, args.models, MODELS, "model")
    return args


def run_model(name: str, args, folder: Path) -> dict:
    """One model's result from its own process; a crash or hang becomes a failure naming the stage."""
    result_path = folder / f"{name}.json"
    cmd = [sys.executable, str(WORKER), name, "--result", str(result_path), "--cache", args.cache]
    try:
        rc = subprocess.run(cmd + (["--rebuild"] if args.rebuild else []), timeout=ALLOWANCE_S).returncode
    except subprocess.TimeoutExpired:
        rc = None
    result = json.loads(result_path.read_text()) if result_path.exists() else {"model": name, "stage": "starting",
                                                                              "failures": []}
    if rc != 0 or result["stage"] != "done":
        result["failures"].append({"stage": result["stage"], "error": f"the model's process {_ended(rc)}"})
        print(f"[{name}] FAILED: its process {_ended(rc)} during {result['stage']}", flush=True)
    return result


def machine() -> dict:
    return {"cpu": cpu_summary(), "cores": core_count(), "onnxruntime": ort.__version__,
            "python": platform.python_version(), "date": datetime.date.today().isoformat()}


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="optim-coverage-") as tmp:
        for name in args.names:
            print(f"[{name}] starting ({time.perf_counter() - t0:.0f} s in)", flush=True)
            results.append(run_model(name, args, Path(tmp)))
    seconds = time.perf_counter() - t0
    print(f"coverage done in {seconds:.0f} s", flush=True)
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    command = f"make coverage  # = .venv/bin/python benchmarks/coverage.py {shown}".rstrip()
    mach = machine()
    for line in coverage_report.summary_lines(results):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": mach, "command": command, "results": results}, indent=2))
    if not args.no_markdown:
        (HERE / "COVERAGE.md").write_text("\n".join(coverage_report.markdown(results, command, mach, seconds)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
