"""What the optim backend did with each graph it was given: where it runs (OptimEP with its placement, or
eager and why), how long the compile took, and the int8 accuracy. `last_report()` reads it; with OPTIM_LOG=1
each compile also logs one line on the "optim.torch" logger."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

log = logging.getLogger("optim.torch")
if os.environ.get("OPTIM_LOG") == "1" and not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # a user's root handler (logging.basicConfig) would print every line a second time


@dataclass
class GraphReport:
    """One compile of one captured graph. `runs_on` is "OptimEP" or "eager" (then `reason` says why);
    `placement` is optim.placement(session) of its session; `seconds` splits the compile time into
    capture (FX -> ONNX), optimize, quantize and session; `accuracy` holds the quantizer's rows (int8)."""

    index: int
    name: str  # the Python function the graph came from ("forward", "torch_dynamo_resume_in_forward_at_12")
    fx_nodes: int
    inputs: dict[str, list]  # ONNX input name -> shape at compile time, "dyn" where the dim is dynamic
    runs_on: str = "eager"
    reason: str = ""
    mode: str = "fp32"  # or "int8"
    placement: object = None  # optim.ep_plugin.Placement
    seconds: dict[str, float] = field(default_factory=dict)
    accuracy: list = field(default_factory=list)  # OutputAccuracy rows of the quantizer (held-out samples)
    notes: list[str] = field(default_factory=list)

    @property
    def compile_seconds(self) -> float:
        """The whole compile: capture, optimize, quantize and session together."""
        return sum(self.seconds.values())

    def line(self) -> str:
        """One line: the graph, where it runs (OptimEP's share of its nodes, or eager and why), int8 accuracy,
        compile time; what OPTIM_LOG=1 logs."""
        shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in self.inputs.items())
        head = f"graph {self.index} ({self.name}, {self.fx_nodes} FX nodes; {shapes})"
        if self.runs_on != "OptimEP":
            return f"{head} -> eager: {self.reason}"
        p = self.placement
        where = f"{p.optim_nodes}/{p.total_nodes} ONNX nodes on OptimEP" if p is not None else "OptimEP"
        acc = ""
        if self.accuracy:
            worst = min((r.cosine for r in self.accuracy if r.cosine is not None), default=None)
            acc = f", cosine vs fp32 {worst:.5f}" if worst is not None else ""
        return f"{head} -> {where}, {self.mode}{acc}, compiled in {self.compile_seconds:.1f} s"

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("placement", "accuracy")}
        d["placement"] = self.placement.to_dict() if self.placement is not None else None
        d["accuracy"] = [r.to_dict() for r in self.accuracy]
        d["compile_seconds"] = self.compile_seconds
        return d


@dataclass
class TorchReport:
    """The graphs compiled (oldest first). `compiles` counts them; `summary()` prints one line each."""

    graphs: list[GraphReport] = field(default_factory=list)

    @property
    def compiles(self) -> int:
        """How many graph compiles there were (a recompile for new shapes or weights counts again)."""
        return len(self.graphs)

    @property
    def on_optimep(self) -> list[GraphReport]:
        """The compiles that run on OptimEP (the others run eagerly)."""
        return [g for g in self.graphs if g.runs_on == "OptimEP"]

    def summary(self) -> str:
        """GraphReport.line() of each compile, one per line."""
        return "\n".join(g.line() for g in self.graphs) or "no graph compiled"

    def to_dict(self) -> dict:
        """JSON-ready: every GraphReport with its placement and accuracy rows."""
        return {"graphs": [g.to_dict() for g in self.graphs]}


_lock = threading.Lock()
_process_report = TorchReport()


def record(report: GraphReport, own: TorchReport | None = None) -> None:
    """Adds a compile to the process-wide report (and to `own`, an accelerated module's) and logs it."""
    with _lock:
        _process_report.graphs.append(report)
        if own is not None:
            own.graphs.append(report)
    log.info(report.line())


def next_index() -> int:
    with _lock:
        return len(_process_report.graphs)


def last_report() -> TorchReport:
    """Every graph the optim backend compiled in this process since the last reset_report() (a copy)."""
    with _lock:
        return TorchReport(list(_process_report.graphs))


def reset_report() -> None:
    """Forgets the graphs compiled so far (the compiled graphs keep running)."""
    with _lock:
        _process_report.graphs.clear()
