"""`optim profile`: where the time of a run goes, per step inside OptimEP's fused nodes and per node that
ran on ONNX Runtime's CPU EP.

One session, two profilers: OptimEP's own (EP option `profile`: each step of each fused node, which ONNX
Runtime only sees whole) and ONNX Runtime's (SessionOptions.enable_profiling: every node, fused ones whole).
The rows are OptimEP's steps, each fused node's time outside its steps (ORT's time for the node minus the
steps: reading inputs, shape planning, outputs), and the nodes other EPs ran. Shares are of the rows' sum.
Both profilers add a little time of their own; compare rows with each other, latency with `optim bench`.
"""

from __future__ import annotations

import gc
import json
import shutil
import statistics
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..inputs import RunInputError, load_inputs, random_inputs, shapes_with_batch
from ..loader import EP_NAME
from ..placement import placement
from ..sessions import session
from ..timing import NO_SPIN, NOISY_CV

PARTITION_OP = "(fused node)"  # op type of a fused node's time outside its steps
_WHERE = {"CPUExecutionProvider": "CPU EP"}


class ProfileError(RuntimeError):
    """A profile could not be taken (e.g. OptimEP wrote no step times)."""


@dataclass
class ProfileRow:
    where: str  # "OptimEP" or "CPU EP" (another EP's name if one ran nodes)
    op: str  # "Conv", "QConv", "Resize"; PARTITION_OP for a fused node's time outside its steps
    nodes: str  # "Conv 'c1' + Relu 'r1'" (an OptimEP step), "Resize 'up'" (a node on another EP)
    input_shapes: list[list[int]]  # OptimEP steps: the first input's (on the last run); other nodes: every input's
    mean_ms: float  # per run of the model
    share: float = 0.0  # of all rows' time
    partition: str = ""  # the fused node an OptimEP row belongs to
    kernel: str = ""  # OptimEP steps: the kernel(s) the step chose at compile time (kernel_list.inc names), if it chose


@dataclass
class Profile:
    model: str
    inputs: dict[str, list[int]]
    runs: int
    warmup: int
    threads: int | None
    isa: str
    run_mean_ms: float  # ONNX Runtime's whole run (model_run events), mean, both profilers on
    run_cv: float  # those runs' standard deviation / mean: above NOISY_CV, means of small rows mean little
    rows: list[ProfileRow]  # by mean time, largest first
    notes: list[str] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        return self.run_cv > NOISY_CV

    @property
    def total_ms(self) -> float:
        return sum(r.mean_ms for r in self.rows)

    def by_op(self) -> list[dict]:
        """Time per (where, op type), largest first."""
        ms: dict[tuple[str, str], float] = defaultdict(float)
        for r in self.rows:
            ms[(r.where, r.op)] += r.mean_ms
        total = self.total_ms
        return [{"where": w, "op": op, "mean_ms": t, "share": t / total if total > 0 else 0.0}
                for (w, op), t in sorted(ms.items(), key=lambda kv: -kv[1])]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_ms"] = self.total_ms
        d["noisy"] = self.noisy
        d["by_op"] = self.by_op()
        return d


def profile(
    model: str,
    *,
    shapes: dict[str, list[int]] | None = None,
    batch: int | None = None,
    inputs: str | None = None,
    runs: int = 50,
    warmup: int = 5,
    threads: int | None = None,
    isa: str = "auto",
    precision: str = "fp32",
    seed: int = 0,
) -> Profile:
    """Runs `model` `warmup` + `runs` times on one OptimEP session with both profilers on and merges them.

    Inputs: an .npz file (`inputs`), else random ones of `shapes` (dynamic dims must be given), with every
    first dim set to `batch` if given. Runs are sequential; the warm-up runs are counted by neither profiler.
    """
    if runs < 1 or warmup < 0:
        raise RunInputError("runs must be >= 1 and warm-up >= 0")
    if inputs and (shapes or batch):
        raise RunInputError("give inputs from an .npz file or shapes (and a batch size) for random ones, not both")
    work = Path(tempfile.mkdtemp(prefix="optim-profile-"))
    steps_file = work / "steps.json"
    try:
        sess = session(model, threads=threads, config=NO_SPIN, isa=isa, precision=precision,
                       ort_profile_prefix=str(work / "ort"),
                       profile=str(steps_file), profile_warmup=warmup)
        try:
            if inputs:
                feeds = load_inputs(inputs, sess)
            else:
                feeds = random_inputs(sess, shapes_with_batch(shapes or {}, sess, batch) if batch else shapes, seed)
            for _ in range(warmup + runs):
                sess.run(None, feeds)
            trace = json.loads(Path(sess.end_profiling()).read_text(encoding="utf-8"))
            used_isa = placement(sess).isa
        finally:
            # OptimEP writes its final step times when the session releases it.
            del sess
            gc.collect()
        try:
            steps = json.loads(steps_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ProfileError(f"{EP_NAME} wrote no step profile ({e})") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    nodes, run_ms = _ort_nodes(trace, warmup)
    rows, notes = _merge(steps, nodes, runs)
    mean = statistics.fmean(run_ms) if run_ms else 0.0
    return Profile(model=str(model), inputs={k: list(v.shape) for k, v in feeds.items()}, runs=runs, warmup=warmup,
                   threads=threads, isa=used_isa, run_mean_ms=mean,
                   run_cv=statistics.pstdev(run_ms) / mean if mean > 0 else 0.0, rows=rows, notes=notes)


@dataclass
class _NodeTimes:
    name: str
    op: str
    provider: str
    input_shapes: list[list[int]]
    total_us: float = 0.0


def _ort_nodes(trace: list[dict], warmup: int) -> tuple[dict[str, _NodeTimes], list[float]]:
    """Per node (by name): ORT's kernel times summed over the runs after the warm-up; and each such run's ms."""
    model_runs = sorted((e for e in trace if e.get("cat") == "Session" and e.get("name") == "model_run"),
                        key=lambda e: e["ts"])
    counted = model_runs[warmup:]
    start = counted[0]["ts"] if counted else 0
    nodes: dict[str, _NodeTimes] = {}
    for e in trace:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time") or e["ts"] < start:
            continue
        args = e.get("args", {})
        name = e["name"][: -len("_kernel_time")] or f"#{args.get('node_index', '?')}"
        n = nodes.get(name)
        if n is None:
            shapes = [next(iter(s.values())) for s in args.get("input_type_shape", []) if s]
            n = nodes[name] = _NodeTimes(name, args.get("op_name", "?"), args.get("provider", "?"), shapes)
        n.total_us += e.get("dur", 0)
    return nodes, [e["dur"] / 1e3 for e in counted]


def _merge(steps: dict, nodes: dict[str, _NodeTimes], runs: int) -> tuple[list[ProfileRow], list[str]]:
    rows, notes = [], []
    for part in steps.get("partitions", []):
        name = part["partition"]
        if part["runs"] != runs:
            notes.append(f"{EP_NAME} counted {part['runs']} run(s) of {name}, not {runs} (inside a loop or branch?)")
        step_ms = 0.0
        for s in part["steps"]:
            ms = s["total_ns"] / 1e6 / runs
            step_ms += ms
            rows.append(ProfileRow(EP_NAME, s["op"], s["label"], [s["input_shape"]] if s["input_shape"] is not None else [],
                                   ms, partition=name, kernel=s.get("kernel") or ""))
        fused = nodes.pop(name, None)
        if fused is not None and fused.total_us / 1e3 / runs > step_ms:
            rows.append(ProfileRow(EP_NAME, PARTITION_OP, f"{name} outside its steps", fused.input_shapes,
                                   fused.total_us / 1e3 / runs - step_ms, partition=name))
    for n in nodes.values():  # nodes OptimEP left to other EPs (and fused nodes it has no steps for)
        rows.append(ProfileRow(_WHERE.get(n.provider, n.provider), n.op, f"{n.op} '{n.name}'", n.input_shapes,
                               n.total_us / 1e3 / runs, partition=n.name if n.provider == EP_NAME else ""))
    total = sum(r.mean_ms for r in rows)
    for r in rows:
        r.share = r.mean_ms / total if total > 0 else 0.0
    rows.sort(key=lambda r: -r.mean_ms)
    return rows, notes


__all__ = ["PARTITION_OP", "Profile", "ProfileError", "ProfileRow", "profile"]
