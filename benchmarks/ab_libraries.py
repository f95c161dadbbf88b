"""Two builds of OptimEP's library on one real-size model, in alternating rounds: what a change did, on a host
whose speed drifts (one run after the other lets a slow spell land on one side only).

    .venv/bin/python benchmarks/ab_libraries.py BEFORE.so AFTER.so --model resnet50 [--precision fp32|int8]
        [--batch 1] [--isa auto] [--rounds 7] [--runs 20] [--threads 2] [--weight-bits 8]

Each round runs each library in a process of its own (a process loads one EP library), BEFORE then AFTER in
odd rounds and the other way in even ones, and takes the median of --runs runs after 2 warm-ups. Prints
every round's medians and their ratio, and the median of the rounds' ratios (> 1: AFTER is faster). The model
comes from the real-size suite's cache (benchmarks/realsize_prepare.py: exported, optimized and quantized as
benchmarks/realsize.py does), with its inputs (realsize_models.model_inputs). Each side's first output is
compared with the other's: builds meant to give the same bytes should print 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from realsize_models import SUITE  # noqa: E402


def one_side(args) -> int:
    """Worker: time one library (OPTIM_EP_LIBRARY set by the parent) and print a JSON line."""
    import numpy as np

    from optim.ep_plugin import session
    from optim.ep_plugin.timing import NO_SPIN
    from realsize_models import model_inputs
    from realsize_prepare import prepare

    prepared = prepare(args.model, Path(args.cache), say=lambda *_: None, weight_bits=args.weight_bits)
    path = prepared.int8 if args.precision == "int8" else prepared.fp32
    sess = session(str(path), threads=args.threads, config=NO_SPIN, isa=args.isa)
    feeds = model_inputs(args.model, args.batch)
    first = sess.run(None, feeds)[0]
    sess.run(None, feeds)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - start)
    np.save(args.output, np.asarray(first))
    print(json.dumps({"median_ms": 1e3 * float(np.median(times))}))
    return 0


def side(lib: str, args, output: Path) -> float:
    cmd = [sys.executable, __file__, "--worker", "--output", str(output)] + [
        f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
        if k in ("model", "precision", "batch", "isa", "runs", "threads", "weight_bits", "cache")]
    done = subprocess.run(cmd, env=dict(os.environ, OPTIM_EP_LIBRARY=lib), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{lib}: the worker exited with {done.returncode}:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["median_ms"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", nargs="?", help="the library before the change (a liboptim_ep.so)")
    ap.add_argument("after", nargs="?", help="the library after the change")
    ap.add_argument("--model", required=True, choices=[m.name for m in SUITE], help="a model of the real-size suite")
    ap.add_argument("--precision", choices=["fp32", "int8"], default="fp32")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--isa", default="auto", help="OptimEP's kernel set (its `isa` option)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per side and round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--weight-bits", type=int, default=8, choices=[8, 7])
    ap.add_argument("--cache", default=str(HERE / ".cache"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return one_side(args)
    if not args.before or not args.after:
        ap.error("give the two libraries: BEFORE.so AFTER.so")
    for lib in (args.before, args.after):
        if not Path(lib).is_file():
            ap.error(f"no such library: {lib}")
    import numpy as np

    spec = {k: v for k, v in vars(args).items() if k not in ("worker", "output", "cache")}
    print(f"A/B {json.dumps(spec)}")
    out = {"before": Path(args.cache) / "ab_before.npy", "after": Path(args.cache) / "ab_after.npy"}
    ratios = []
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        ms = {name: side(getattr(args, name), args, out[name]) for name in order}
        ratios.append(ms["before"] / ms["after"])
        print(f"round {r + 1}: before {ms['before']:.2f} ms, after {ms['after']:.2f} ms, before / after {ratios[-1]:.3f}")
    diff = float(np.abs(np.load(out["before"]).astype(np.float64) - np.load(out["after"])).max())
    print(f"median of the rounds' before / after: {np.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f}); "
          f"max |before - after| of the first output: {diff:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
