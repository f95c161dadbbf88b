"""One model of the coverage table, end to end, in a process of its own.

    .venv/bin/python benchmarks/coverage_model.py crnn --result r.json [--cache benchmarks/.cache] [--rebuild]

Prepares the model with optim's own pipeline (export, optimize, quantize; cached and shared with the real-size
suite, see realsize_prepare.py), opens fp32 and int8 sessions on OptimEP and on ONNX Runtime's CPU EP, records
where each node runs (and why OptimEP refused the others), runs each session once on batch 1 and compares its
output with the fp32 CPU EP's. coverage.py runs this once per model: a native crash ends only this process, and
the result file (rewritten after every stage) says how far it got.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from realsize_model import REFERENCE, check_outputs, prepared_sessions
from realsize_models import BY_NAME, model_inputs

HERE = Path(__file__).resolve().parent
THREADS = 2


def run(args) -> int:
    args.threads = THREADS
    started = prepared_sessions(args)
    if started is None:
        return 0
    record, say, _, sessions = started
    errors = check_outputs(sessions, model_inputs(args.model, 1, seed=0), 1, record, say)
    record.update(stage="done", rel_l2_vs_fp32_cpu=errors, reference=REFERENCE)
    return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(BY_NAME))
    ap.add_argument("--result", required=True, help="JSON file to write the result to")
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder of the cached ONNX files")
    ap.add_argument("--rebuild", action="store_true", help="export, optimize and quantize again even if cached")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    try:
        return run(parse_args(argv))
    except Exception:  # the parent reports it with the stage; the traceback helps whoever fixes it
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
