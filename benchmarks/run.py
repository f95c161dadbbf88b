"""The project's benchmark suite: the zoo on OptimEP vs ONNX Runtime's CPU EP, side by side.

    .venv/bin/python benchmarks/run.py [--runs 50] [--threads 2] [--batch 1,16] [--no-minilm] [--json out.json]

Exports each zoo model (needs torch) and quantizes it to int8 QDQ with optim's own library functions
(optim.exporter.export, optim.optimizer.quantization.quantize), then for each batch size times, in
alternation (A B A B, so that drift hits all sides equally; optim.ep_plugin.timing): fp32 on OptimEP and the CPU EP (ORT's
default, all graph optimizations), then PyTorch eager (the zoo's module) in a phase of its own; int8 on OptimEP, the CPU EP and the CPU EP with optimizations
disabled (ORT's exact reference). Reports medians, p90, the ratio CPU-EP median / OptimEP median
(> 1: OptimEP is faster) and int8 accuracy against fp32, and rewrites the tables between the markers
in benchmarks/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

# PyTorch's OpenMP threads would otherwise spin after each eager run and steal the cores from the
# next runtime's run (set before torch is imported).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS threads would spin on the cores being timed

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from optim.common.comparison import relative_l2  # noqa: E402
from optim.common.machine import core_count, cpu_summary  # noqa: E402
from optim.ep_plugin import cpu_session, placement, session  # noqa: E402
from optim.ep_plugin.timing import NO_SPIN, summarize, time_alternating  # noqa: E402
from optim.models import ZOO, example_inputs  # noqa: E402

HERE = Path(__file__).resolve().parent
FP32_MARKERS = ("<!-- fp32-zoo:begin -->", "<!-- fp32-zoo:end -->")
INT8_MARKERS = ("<!-- int8-zoo:begin -->", "<!-- int8-zoo:end -->")
CALIBRATION_SEEDS = range(1000, 1016)  # calibration inputs; timing and accuracy use other seeds
HELD_OUT_SEEDS = range(1016, 1020)  # the quantizer's accuracy report (all the calibration seeds calibrate)


def calibration_inputs(name: str, seed: int) -> dict[str, np.ndarray]:
    if name == "minilm":
        from optim.models import minilm

        return minilm.examples(seed=seed, batch=1, length=MINILM_SEQUENCE)
    return example_inputs(name, seed=seed)


def quantize_int8(fp32: Path, name: str, folder: Path) -> Path:
    """Static int8 QDQ by optim's quantizer (per-channel int8 weights, uint8 activations), calibrated on
    zoo example inputs; for MiniLM only the MatMuls with constant weights (quantizing attention's
    activation x activation MatMuls and the LayerNorm inputs ruins it)."""
    from optim.optimizer.quantization import quantize

    for part, seeds in (("calib", CALIBRATION_SEEDS), ("held_out", HELD_OUT_SEEDS)):
        (folder / part).mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            np.savez(folder / part / f"{seed}.npz", **calibration_inputs(name, seed))
    recipe = {}
    if name == "minilm":
        graph = onnx.load(str(fp32), load_external_data=False).graph
        weights = {t.name for t in graph.initializer}
        recipe = {"op_types": ["MatMul"],
                  "exclude": [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] not in weights]}
    out = folder / f"{name}.int8.onnx"
    quantize(fp32, out, calibration=folder / "calib", evaluation=folder / "held_out", **recipe)
    return out


class TorchEager:
    """The zoo's PyTorch module in eager mode, with an InferenceSession-like run() for time_alternating."""

    def __init__(self, name: str, threads: int):
        import torch

        from optim.models import get

        torch.set_num_threads(threads)
        self._torch = torch
        self._entry = get(name)
        self._module = self._entry.factory()

    def run(self, _outputs, feeds):
        with self._torch.inference_mode():
            args = [self._torch.from_numpy(feeds[n]) for n, _, _ in self._entry.inputs]
            return [self._module(*args)]


# Batch sizes per model (issue 6's set); MiniLM runs at sequence length MINILM_SEQUENCE.
DEFAULT_BATCHES = {"mlp": [1, 32], "cnn": [1, 16], "transformer": [1, 16], "minilm": [1, 8]}
MINILM_SEQUENCE = 128


def batch_inputs(name: str, batch: int) -> dict[str, np.ndarray]:
    if name == "minilm":
        from optim.models import minilm

        return minilm.examples(seed=batch, batch=batch, length=MINILM_SEQUENCE)
    parts = [example_inputs(name, seed=i) for i in range(batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def time_stats(sessions: dict, feeds, runs: int, warmup: int, batch: int) -> dict[str, dict]:
    """Latency statistics (as dicts) of each session, from alternating runs after each one's warm-up."""
    return {k: asdict(summarize(t, batch)) for k, t in time_alternating(sessions, feeds, warmup, runs, None).items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", help="comma-separated batch sizes for every model (default: per model, see DEFAULT_BATCHES)")
    ap.add_argument("--no-minilm", action="store_true", help="leave out MiniLM (the slowest to export and quantize)")
    ap.add_argument("--models", help="comma-separated zoo names to run (default: all, and MiniLM)")
    ap.add_argument("--json", help="also write all results to this file")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    forced = [int(b) for b in args.batch.split(",")] if args.batch else None
    names = list(ZOO) + ([] if args.no_minilm else ["minilm"])
    if args.models:
        unknown = sorted(set(args.models.split(",")) - set(names))
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(names)}")
        names = [n for n in names if n in args.models.split(",")]

    from optim.exporter import export  # torch only here: running models never needs it

    fp32_rows, int8_rows = [], []
    # Pool threads that spin after a run would steal the cores from the next session's run.
    kw = {"threads": args.threads, "config": NO_SPIN}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = export(name, Path(tmp) / f"{name}.onnx").path
            int8 = quantize_int8(Path(path), name, Path(tmp) / f"{name}-int8")
            sessions = {
                "fp32_optim": session(str(path), **kw),
                "fp32_cpu": cpu_session(str(path), **kw),
                "int8_optim": session(str(int8), **kw),
                "int8_cpu": cpu_session(str(int8), **kw),
                "int8_cpu_noopt": cpu_session(str(int8), optimization="disable", **kw),
            }
            torch_eager = TorchEager(name, args.threads)
            p32, p8 = placement(sessions["fp32_optim"]), placement(sessions["int8_optim"])
            for batch in forced or DEFAULT_BATCHES[name]:
                feeds = batch_inputs(name, batch)
                st = time_stats(sessions, feeds, args.runs, args.warmup, batch)
                # PyTorch in its own phase: its thread pool lingers after each run and would slow
                # whichever ONNX Runtime session ran next.
                st.update(time_stats({"fp32_torch": torch_eager}, feeds, args.runs, args.warmup, batch))
                fp32_rows.append({"model": name, "batch": batch, "optim": st["fp32_optim"], "cpu": st["fp32_cpu"],
                                  "torch": st["fp32_torch"],
                                  "ratio": st["fp32_cpu"]["median_ms"] / st["fp32_optim"]["median_ms"],
                                  "ratio_torch": st["fp32_torch"]["median_ms"] / st["fp32_optim"]["median_ms"],
                                  "placement": f"{p32.optim_nodes}/{p32.total_nodes}"})
                ref = sessions["fp32_cpu"].run(None, feeds)[0]
                int8_rows.append({
                    "model": name, "batch": batch, "optim": st["int8_optim"], "cpu": st["int8_cpu"],
                    "cpu_noopt": st["int8_cpu_noopt"],
                    "ratio": st["int8_cpu"]["median_ms"] / st["int8_optim"]["median_ms"],
                    "ratio_noopt": st["int8_cpu_noopt"]["median_ms"] / st["int8_optim"]["median_ms"],
                    "placement": f"{p8.optim_nodes}/{p8.total_nodes}", "integer_units": p8.integer_units,
                    "rel_l2": {k: relative_l2(sessions[k].run(None, feeds)[0], ref)
                               for k in ("int8_optim", "int8_cpu", "int8_cpu_noopt")},
                })
                r8 = int8_rows[-1]
                print(f"{name:12s} batch {batch:3d}  fp32 ratio {fp32_rows[-1]['ratio']:.2f} "
                      f"({st['fp32_optim']['median_ms']:.3f} vs {st['fp32_cpu']['median_ms']:.3f} ms)  "
                      f"int8 ratio {r8['ratio']:.2f} ({st['int8_optim']['median_ms']:.3f} vs {st['int8_cpu']['median_ms']:.3f} ms, "
                      f"noopt {st['int8_cpu_noopt']['median_ms']:.3f})  rel L2 {r8['rel_l2']['int8_optim']:.4f} vs "
                      f"{r8['rel_l2']['int8_cpu']:.4f}", flush=True)

    command = "make bench  # = .venv/bin/python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    machine = {"cpu": cpu_summary(), "cores": core_count(), "onnxruntime": ort.__version__,
               "python": platform.python_version(), "threads": args.threads, "runs": args.runs,
               "spinning": "off (session.intra_op.allow_spinning=0 for every session)"}
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "command": command, "fp32": fp32_rows,
                                               "int8": int8_rows}, indent=2))
    if not args.no_markdown:
        write_markdown(fp32_rows, int8_rows, machine, command)
    return 0


def _header(machine, command) -> list[str]:
    return ["", f"Command: `{command.strip()}`  ",
            f"Machine: {machine['cpu']}, {machine['cores']} cores; onnxruntime {machine['onnxruntime']}, "
            f"{machine['threads']} intra-op threads (no spinning), {machine['runs']} alternating runs per side (after warm-up).", ""]


def _replace_between(text: str, markers: tuple[str, str], lines: list[str], heading: str | None = None) -> str:
    """`text` with `lines` between the markers; with `heading`, markers not there yet come first as a new section
    at the end (a benchmark's first run with other settings)."""
    if heading is not None and markers[0] not in text:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n{markers[0]}\n{markers[1]}\n"
    start, end = text.index(markers[0]), text.index(markers[1]) + len(markers[1])
    return text[:start] + "\n".join([markers[0], *lines, "", markers[1]]) + text[end:]


def write_markdown(fp32_rows, int8_rows, machine, command) -> None:
    fp32 = _header(machine, command) + [
        "| model | batch | on OptimEP | OptimEP median (ms) | CPU EP median (ms) | PyTorch eager median (ms) | "
        "ratio CPU/OptimEP | ratio PyTorch/OptimEP | OptimEP p90 | CPU EP p90 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in fp32_rows:
        fp32.append(f"| {r['model']} | {r['batch']} | {r['placement']} | {r['optim']['median_ms']:.3f} | "
                    f"{r['cpu']['median_ms']:.3f} | {r['torch']['median_ms']:.3f} | {r['ratio']:.2f} | "
                    f"{r['ratio_torch']:.2f} | {r['optim']['p90_ms']:.3f} | {r['cpu']['p90_ms']:.3f} |")
    int8 = _header(machine, command) + [
        "| model | batch | on OptimEP | integer units | OptimEP median (ms) | CPU EP (ms) | CPU EP no-opt (ms) | "
        "ratio CPU/OptimEP | ratio no-opt/OptimEP | rel. L2 vs fp32: OptimEP / CPU EP / no-opt |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in int8_rows:
        e = r["rel_l2"]
        int8.append(f"| {r['model']} | {r['batch']} | {r['placement']} | {r['integer_units']} | {r['optim']['median_ms']:.3f} | "
                    f"{r['cpu']['median_ms']:.3f} | {r['cpu_noopt']['median_ms']:.3f} | {r['ratio']:.2f} | "
                    f"{r['ratio_noopt']:.2f} | {e['int8_optim']:.4f} / {e['int8_cpu']:.4f} / {e['int8_cpu_noopt']:.4f} |")
    md = HERE / "BENCHMARKS.md"
    text = _replace_between(md.read_text(), FP32_MARKERS, fp32)
    md.write_text(_replace_between(text, INT8_MARKERS, int8))


if __name__ == "__main__":
    sys.exit(main())
