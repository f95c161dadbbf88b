"""Structured pruning (`optim prune`): speed-up on OptimEP of real-size models pruned 30% and 50%, fp32 and int8, and
the accuracy recovered on real-weight models.

    .venv/bin/python benchmarks/prune.py [--models resnet18,resnet50,mobilenetv2,efficientnet_b0,bert_base]
        [--ratios 0.3,0.5] [--batches 1,8] [--runs 20] [--threads 2] [--accuracy digits,minilm] [--minilm-steps 4800]
        [--reuse-speed earlier.json [--retime bert_base]] [--json out.json] [--no-markdown]

Speed: each model (optim.models.REALSIZE, random weights: accuracy means nothing there) is pruned with magnitude
importance and uniform ratios, recovered for a few steps on random inputs (to time a step), and the original and
pruned models are exported, quantized to int8 and timed on OptimEP by optim.pruning itself (alternating runs,
medians). Accuracy: the digits CNN (scikit-learn's digits, trained here) pruned by half with labels, top-1 on the
test images; MiniLM (all-MiniLM-L6-v2, its real weights) pruned 30% (Taylor importance, sensitivity ratios) and
distilled (batch 32, the default lr) on ~5,500 English sentences from Python's own docstrings
(optim.models.minilm.corpus; 10% of them held out for the best-state choice), mean cosine of the sentence embeddings
to the original's on 300 sentences it never saw, and its own speed-up on OptimEP at sequence 32 and 128. Rewrites
the tables between the prune markers in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from optim.common.machine import core_count, cpu_summary
from optim.pruning import prune
from optim.pruning.report import measure_latency
from run import HERE, _replace_between

MARKERS = ("<!-- prune:begin -->", "<!-- prune:end -->")
MINILM_TEST = 300  # corpus sentences to check on (the last ones); the rest to learn from
MINILM_LENGTH = 32
MINILM_SPEED_LENGTHS = (32, 128)  # its sentences' length, and the suite's BERT sequence


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,mobilenetv2,efficientnet_b0,bert_base")
    ap.add_argument("--ratios", default="0.3,0.5")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=core_count())
    ap.add_argument("--accuracy", default="digits,minilm", help="real-weight models for the accuracy rows ('' none)")
    ap.add_argument("--minilm-steps", type=int, default=4800)
    ap.add_argument("--reuse-speed", metavar="JSON",
                    help="take the speed rows from an earlier run's --json file instead of timing again (e.g. after "
                         "changing only the recovery)")
    ap.add_argument("--retime", metavar="MODELS",
                    help="with --reuse-speed: time these models again (at --ratios) and keep the file's rows of the "
                         "others (e.g. after an EP change that only transformers run)")
    ap.add_argument("--json")
    ap.add_argument("--no-markdown", action="store_true")
    return ap.parse_args(argv)


def speed_rows(args, folder: Path, names: list[str]) -> list[dict]:
    rows = []
    for name in names:
        for ratio in map(float, args.ratios.split(",")):
            t0 = time.perf_counter()
            r = prune(name, folder / f"{name}.pt2", ratio=ratio, steps=10, samples=24, batch_size=8,
                      latency_batches=[int(b) for b in args.batches.split(",")], latency_runs=args.runs,
                      threads=args.threads, progress=lambda line: print(f"{name} {ratio}: {line}", file=sys.stderr))
            row = {"model": name, "ratio": ratio, "params": r.params, "macs": r.macs,
                   "step_s": r.recovery.seconds / max(r.recovery.steps, 1), "seconds": time.perf_counter() - t0,
                   "latency": [lat.__dict__ for lat in r.latency]}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def merged_rows(kept: list[dict], fresh: list[dict]) -> list[dict]:
    """The earlier rows with each re-timed model's rows in place of its old ones (a new model at the end)."""
    retimed = {r["model"] for r in fresh}
    out, placed = [], set()
    for row in kept:
        if row["model"] not in retimed:
            out.append(row)
        elif row["model"] not in placed:
            out.extend(r for r in fresh if r["model"] == row["model"])
            placed.add(row["model"])
    return out + [r for r in fresh if r["model"] not in placed]


def digits_row(folder: Path) -> dict:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from digits_helpers import trained_digits

    net = trained_digits(folder)
    np.savez(folder / "train.npz", x=net.x[net.train], labels=net.y[net.train])
    sys.path.insert(0, str(folder))
    import digits_net

    original = digits_net.build()
    original.load_state_dict(torch.load(net.weights))
    r = prune("digits_net:build", folder / "digits.pt2", weights=net.weights, inputs=["x:batchx1x8x8"], ratio=0.5,
              data=folder / "train.npz", importance="taylor", batch_size=64, latency=False)
    pruned = torch.export.load(str(folder / "digits.pt2")).module()
    x, y = torch.from_numpy(net.x[net.test]), net.y[net.test]
    with torch.no_grad():
        before = float(np.mean(original.eval()(x).argmax(-1).numpy() == y))
        after = float(np.mean(pruned(x).argmax(-1).numpy() == y))
    return {"model": "digits CNN (scikit-learn digits)", "ratio": 0.5, "macs": r.macs, "params": r.params,
            "metric": "test top-1", "before": before, "after": after, "steps": r.recovery.steps,
            "recovery_s": r.recovery.seconds, "seconds": r.seconds}


def minilm_row(folder: Path, steps: int, batches, runs: int, threads: int) -> dict:
    from optim.models.minilm import build, corpus, tokenize

    sentences = corpus()
    train = tokenize(sentences[:-MINILM_TEST], MINILM_LENGTH)
    test = tokenize(sentences[-MINILM_TEST:], MINILM_LENGTH)
    np.savez(folder / "minilm.npz", **train)
    r = prune("minilm", folder / "minilm.pt2", ratio=0.3, data=folder / "minilm.npz", importance="taylor",
              allocation="sensitivity", steps=steps, batch_size=32, holdout=0.1, latency=False,
              progress=lambda line: print(f"minilm: {line}", file=sys.stderr))
    pruned = torch.export.load(str(folder / "minilm.pt2")).module()
    args = (torch.from_numpy(test["input_ids"]), torch.from_numpy(test["attention_mask"]))
    with torch.no_grad():
        want, got = build()(*args).numpy(), pruned(*args).numpy()
    cosine = np.sum(want * got, -1) / np.linalg.norm(want, axis=-1) / np.linalg.norm(got, axis=-1)
    calibration = [{k: v[i:i + 32] for k, v in train.items()} for i in range(0, 128, 32)]
    speed = {}
    for length in MINILM_SPEED_LENGTHS:
        shapes = {"input_ids": [1, length], "attention_mask": [1, length]}
        lats = measure_latency(folder / "minilm.pt2", "minilm", {}, calibration, shapes, list(batches), runs, threads,
                               lambda line: print(f"minilm: {line}", file=sys.stderr))
        speed[length] = [lat.__dict__ for lat in lats]
    return {"model": "MiniLM (all-MiniLM-L6-v2)", "ratio": 0.3, "macs": r.macs, "params": r.params,
            "metric": "mean cosine to the original's embeddings (unseen sentences)", "before": 1.0,
            "after": float(np.mean(cosine)), "worst": float(np.min(cosine)), "steps": r.recovery.steps,
            "recovery_s": r.recovery.seconds, "seconds": r.seconds, "speed": speed}


def render(rows, accuracy, machine, command, args) -> str:
    lines = [f"Command: {command}  ", f"Machine: {machine}.  ",
             f"Latency: median ms of {args.runs} alternating runs on OptimEP of the original and pruned models, exported "
             "and quantized by `optim prune` itself (static int8, calibrated on 4 batches of random inputs); "
             "speed-up = original / pruned. Random weights: the accuracy rows below are the real-weight models.", "",
             "| model | pruned | params (M) | GMACs | batch | fp32 ms original | fp32 ms pruned | fp32 speed-up | "
             "int8 ms original | int8 ms pruned | int8 speed-up | recovery s/step (batch 8) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def ms(v):
        return f"{v:.2f}" if v else "-"

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"

    for r in rows:
        for lat in r["latency"]:
            lines.append(
                f"| {r['model']} | {r['ratio']:.0%} | {r['params'][0] / 1e6:.1f} -> {r['params'][1] / 1e6:.1f} | "
                f"{r['macs'][0] / 1e9:.2f} -> {r['macs'][1] / 1e9:.2f} | {lat['batch']} | {ms(lat['original_fp32'])} | "
                f"{ms(lat['pruned_fp32'])} | {ratio(lat['original_fp32'], lat['pruned_fp32'])} | "
                f"{ms(lat['original_int8'])} | {ms(lat['pruned_int8'])} | "
                f"{ratio(lat['original_int8'], lat['pruned_int8'])} | {r['step_s']:.2f} |")
    if accuracy:
        lines += ["", "Accuracy recovered on real weights (held-out data the recovery never saw):", "",
                  "| model | pruned | MMACs | metric | original | pruned + recovered | recovery steps (s) |",
                  "|---|---:|---:|---|---:|---:|---:|"]
        for a in accuracy:
            worst = f" (worst {a['worst']:.3f})" if "worst" in a else ""
            lines.append(f"| {a['model']} | {a['ratio']:.0%} | {a['macs'][0] / 1e6:.4g} -> {a['macs'][1] / 1e6:.4g} | "
                         f"{a['metric']} | {a['before']:.4f} | {a['after']:.4f}{worst} | {a['steps']} "
                         f"({a['recovery_s']:.0f} s) |")
        timed = [(a["model"], length, lat) for a in accuracy for length, lats in a.get("speed", {}).items()
                 for lat in lats]
        if timed:
            lines += ["", "The real-weight models' own speed-up on OptimEP (same timing as above, at each sequence "
                      "length):", "",
                      "| model | sequence | batch | fp32 ms original | fp32 ms pruned | fp32 speed-up | "
                      "int8 ms original | int8 ms pruned | int8 speed-up |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for model, length, lat in timed:
                lines.append(f"| {model} | {length} | {lat['batch']} | {ms(lat['original_fp32'])} | "
                             f"{ms(lat['pruned_fp32'])} | {ratio(lat['original_fp32'], lat['pruned_fp32'])} | "
                             f"{ms(lat['original_int8'])} | {ms(lat['pruned_int8'])} | "
                             f"{ratio(lat['original_int8'], lat['pruned_int8'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="optim-prune-bench-") as tmp:
        folder = Path(tmp)
        accuracy = []
        wanted = [a for a in args.accuracy.split(",") if a]
        if "digits" in wanted:
            accuracy.append(digits_row(folder))
            print(json.dumps(accuracy[-1]), file=sys.stderr)
        if "minilm" in wanted:
            accuracy.append(minilm_row(folder, args.minilm_steps, [int(b) for b in args.batches.split(",")], args.runs,
                                       args.threads))
            print(json.dumps(accuracy[-1]), file=sys.stderr)
        if args.reuse_speed:
            rows = json.loads(Path(args.reuse_speed).read_text())["rows"]
            if args.retime:
                rows = merged_rows(rows, speed_rows(args, folder, args.retime.split(",")))
        else:
            rows = speed_rows(args, folder, args.models.split(",")) if args.models else []
    machine = (f"{cpu_summary()}, {core_count()} cores; onnxruntime {ort.__version__}; {args.threads} threads; "
               f"OptimEP's kernels: auto")
    command = "`.venv/bin/python benchmarks/prune.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`"
    table = render(rows, accuracy, machine, command.replace(" `", "`"), args)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows, "accuracy": accuracy}, indent=2))
    if not args.no_markdown:
        doc = HERE / "BENCHMARKS.md"
        doc.write_text(_replace_between(doc.read_text(), MARKERS, table.splitlines(),
                                        heading="Structured pruning (issue 31): `optim prune`"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
