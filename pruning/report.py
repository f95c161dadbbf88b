"""What `optim prune` reports: size and compute before and after, accuracy on the held-out samples before and
after recovery, and latency on OptimEP of both models in fp32 and int8 (exported and quantized as a user would)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from optim.optimizer.quantization.accuracy import OutputAccuracy

from .recover import Recovery


@dataclass
class Latency:
    """Median ms per batch on OptimEP (alternating runs), per model and precision; None where a step failed."""

    batch: int
    original_fp32: float | None
    pruned_fp32: float | None
    original_int8: float | None = None
    pruned_int8: float | None = None
    runs: int = 0
    notes: list[str] = field(default_factory=list)

    def speedup(self, precision: str) -> float | None:
        a, b = getattr(self, f"original_{precision}"), getattr(self, f"pruned_{precision}")
        return a / b if a and b else None


@dataclass
class PruneResult:
    """What prune() did: the archive written, the groups pruned and their widths, parameters and MACs before and
    after, held-out accuracy against the original before and after recovery (and against --data's labels), the
    recovery run, and the latency of both models on OptimEP (one Latency per batch size; empty without latency)."""

    path: str
    source: str
    importance: str
    allocation: str
    ratio: float  # the uniform-equivalent ratio asked for (or found for --speedup)
    groups: dict[str, int]  # kind -> groups pruned
    params: tuple[int, int]  # before, after
    macs: tuple[int, int]  # before, after (convolution and linear layers, on the example inputs)
    widths: list[tuple[str, str, int, int]]  # (kind, first layer, before, after) per group
    samples: tuple[int, int]  # training, held-out
    accuracy_pruned: list[OutputAccuracy]  # held-out, the pruned model before recovery vs the original
    accuracy: list[OutputAccuracy]  # held-out, the recovered model vs the original
    recovery: Recovery
    label_accuracy: tuple[float, float] | None = None  # original, recovered: top-1 against --data's labels
    target: str | None = None
    latency: list[Latency] = field(default_factory=list)  # per batch size
    seconds: float = 0.0

    @property
    def compute_speedup(self) -> float:
        return self.macs[0] / max(self.macs[1], 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accuracy_pruned"] = [r.to_dict() for r in self.accuracy_pruned]
        d["accuracy"] = [r.to_dict() for r in self.accuracy]
        d["recovery"] = self.recovery.to_dict()
        d["compute_speedup"] = self.compute_speedup
        for lat, row in zip(self.latency, d["latency"]):
            row["speedup_fp32"] = lat.speedup("fp32")
            row["speedup_int8"] = lat.speedup("int8")
        return d


def format_report(r: PruneResult) -> list[str]:
    """The report as `optim prune` prints it, one line per item."""
    kinds = ", ".join(f"{n} {k}" for k, n in r.groups.items())
    lines = [
        f"pruned {r.source} -> {r.path} ({r.importance} importance, {r.allocation} ratios, {kinds} group(s))",
        f"  parameters  {r.params[0] / 1e6:9.3f} M -> {r.params[1] / 1e6:9.3f} M  ({r.params[1] / r.params[0]:.1%})",
        f"  GMACs       {r.macs[0] / 1e9:9.3f}   -> {r.macs[1] / 1e9:9.3f}    ({r.compute_speedup:.2f}x fewer)",
        f"  samples     {r.samples[0]} to learn from, {r.samples[1]} held out",
        "  held-out accuracy against the original, pruned before recovery:",
        *(f"    {row}" for row in r.accuracy_pruned),
        f"  after recovery ({r.recovery.steps} steps in {r.recovery.seconds:.1f} s, best at step {r.recovery.best_step}"
        f"{', target met early' if r.recovery.stopped_early else ''}):",
        *(f"    {row}" for row in r.accuracy),
    ]
    if r.label_accuracy is not None:
        lines.append(f"  top-1 against the labels: original {r.label_accuracy[0]:.2%}, pruned {r.label_accuracy[1]:.2%}")
    if r.target:
        lines.append(f"  target {r.target}: met")
    for lat in r.latency:
        def cell(v):
            return f"{v:8.2f}" if v is not None else "       -"

        lines.append(f"  OptimEP latency, batch {lat.batch} (median ms of {lat.runs} alternating runs):")
        for precision in ("fp32", "int8"):
            s = lat.speedup(precision)
            lines.append(f"    {precision}  original {cell(getattr(lat, f'original_{precision}'))}  pruned "
                         f"{cell(getattr(lat, f'pruned_{precision}'))}  " + (f"{s:.2f}x" if s else "-"))
        lines.extend(f"    note: {n}" for n in lat.notes)
    lines.append(f"  took {r.seconds:.1f} s")
    return lines


def measure_latency(pruned_archive: Path, original_spec: str, export_kwargs: dict, calibration: list[dict],
                    shapes: dict[str, list[int]], batches: list[int], runs: int, threads: int | None,
                    progress=None) -> list[Latency]:
    """Exports the original SPEC and the pruned archive to ONNX, quantizes both to int8 with `calibration`, and
    times the four on OptimEP with alternating runs on the same inputs. A step that fails is a note, not an error
    (the pruned model itself is already checked)."""
    from optim.ep_plugin import session
    from optim.ep_plugin.inputs import random_inputs
    from optim.ep_plugin.timing import NO_SPIN, time_alternating
    from optim.exporter import export
    from optim.optimizer.quantization.quantize import quantize

    say = progress or (lambda _line: None)
    notes: list[str] = []
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="optim-prune-") as tmp:
        for name, spec, kwargs in (("original", original_spec, export_kwargs), ("pruned", str(pruned_archive), {})):
            fp32 = os.path.join(tmp, f"{name}.onnx")
            say(f"latency: exporting the {name} model to ONNX")
            try:
                export(spec, fp32, **kwargs)
                files[f"{name}_fp32"] = fp32
            except Exception as e:  # reported, not fatal: the pruned archive is the product
                notes.append(f"exporting the {name} model failed: {type(e).__name__}: {str(e).splitlines()[0]}")
                continue
            int8 = os.path.join(tmp, f"{name}.int8.onnx")
            say(f"latency: quantizing the {name} model to int8")
            try:
                quantize(fp32, int8, calibration=calibration, allow_loss=True)
                files[f"{name}_int8"] = int8
            except Exception as e:
                notes.append(f"quantizing the {name} model failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        sessions = {}
        for key, path in files.items():
            try:
                sessions[key] = session(path, threads=threads, config=NO_SPIN)
            except Exception as e:
                notes.append(f"the {key.replace('_', ' ')} model does not load on OptimEP: {str(e).splitlines()[0]}")
        result = []
        for batch in batches:
            medians: dict[str, float] = {}
            if sessions:
                first = next(iter(sessions.values()))
                feeds = random_inputs(first, {k: [batch, *v[1:]] for k, v in shapes.items()}, seed=0)
                say(f"latency: timing {len(sessions)} models on OptimEP, batch {batch}, {runs} alternating runs")
                times = time_alternating(sessions, feeds, warmup=3, runs=runs, duration=None)
                medians = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
            result.append(Latency(batch, medians.get("original_fp32"), medians.get("pruned_fp32"),
                                  medians.get("original_int8"), medians.get("pruned_int8"), runs, list(notes)))
    return result
