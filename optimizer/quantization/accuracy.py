"""How much an int8 model differs from its float original on the same inputs: per output the cosine
similarity (of the whole flattened output, and the mean over samples), the signal-to-quantization-noise
ratio (dB), the max absolute error, and, for a named logits output, how often the top-1 class agrees. An
output made by a Concat (slices.py) is also measured part by part, one made by a single op channel group by channel
group where some channels' range is far below the output's, and a part (or an output) whose int8 values
lost their signal is flagged collapsed: a detector's class scores flattened to 0 hide behind the boxes'
cosine of 0.9999 otherwise."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .slices import OutputSlices, small_channel_groups

# An output or part whose int8 values all sit on one level while the float ones vary, or whose cosine against the
# float values falls below this, has lost its signal: collapsed.
COLLAPSE_COSINE = 0.9


@dataclass
class SliceAccuracy:
    part: str  # where along the output it comes from: "Concat 'cat' input 'scores'"
    cosine: float
    sqnr_db: float
    max_abs: float
    levels: int  # distinct values of the int8 model's part (up to 2 counted: 1 means one level)
    collapsed: bool

    def __str__(self) -> str:
        flag = "  COLLAPSED" if self.collapsed else ""
        return f"{self.part}: cosine {self.cosine:.5f}  SQNR {self.sqnr_db:6.2f} dB  max abs {self.max_abs:.4g}{flag}"


@dataclass
class OutputAccuracy:
    output: str
    runtime: str  # where the int8 model ran: "OptimEP" or "CPU EP"
    cosine: float  # of the flattened outputs, all held-out batches together
    sqnr_db: float
    max_abs: float
    top1: float | None = None  # agreement with the float model's argmax, for the logits output
    mean_cosine: float | None = None  # per sample (a row of the first axis), averaged; e.g. sentence embeddings
    collapsed_whole: bool = False  # the whole output lost its signal
    levels: int = 2  # distinct values of the int8 model's output (up to 2 counted: 1 means one level)
    slices: list[SliceAccuracy] = field(default_factory=list)  # its Concat parts, or its small-range channel groups

    @property
    def collapsed(self) -> bool:
        return self.collapsed_whole or any(s.collapsed for s in self.slices)

    def worst_slice(self) -> SliceAccuracy | None:
        return min(self.slices, key=lambda s: (not s.collapsed, s.cosine)) if self.slices else None

    def to_dict(self) -> dict:
        return dict(asdict(self), collapsed=self.collapsed)

    def __str__(self) -> str:
        top = f"  top-1 agreement {self.top1:.1%}" if self.top1 is not None else ""
        mean = f" (mean per sample {self.mean_cosine:.5f})" if self.mean_cosine is not None else ""
        flag = "  COLLAPSED" if self.collapsed_whole else ""
        line = (f"{self.output:<16} on {self.runtime:<8} cosine {self.cosine:.5f}{mean}  SQNR {self.sqnr_db:6.2f} dB  "
                f"max abs {self.max_abs:.4g}{top}{flag}")
        worst = self.worst_slice()
        return line + (f"\n    worst part: {worst}" if worst is not None else "")


def lowest(rows: list[OutputAccuracy], field: str) -> list[float]:
    """Every value of `field` ("cosine", "sqnr_db") over `rows` and their parts (a Concat's inputs, small channel
    groups): where a loss can hide, the lowest is what counts."""
    return [getattr(r, field) for r in rows] + [getattr(s, field) for r in rows for s in r.slices]


def _rows(a: np.ndarray) -> np.ndarray:
    """One row per sample: the first axis, or the whole array for scalars and vectors."""
    return a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)


def _cosine(r: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Row-wise cosine of float64 rows; two all-zero rows agree (1), one zero row against another does not (0)."""
    norms = np.linalg.norm(r, axis=-1) * np.linalg.norm(g, axis=-1)
    both_zero = (np.linalg.norm(r, axis=-1) == 0) & (np.linalg.norm(g, axis=-1) == 0)
    return np.where(both_zero, 1.0, np.sum(r * g, axis=-1) / np.maximum(norms, 1e-300))


def _flat_metrics(r: np.ndarray, g: np.ndarray) -> tuple[float, float, float, int, bool]:
    """(cosine, SQNR dB, max abs error, int8 levels (1 or 2: at least two), collapsed) of two flat float64 arrays."""
    noise = np.sum((g - r) ** 2)
    cosine = float(_cosine(r, g))
    sqnr = float(10 * np.log10(np.sum(r ** 2) / noise)) if noise > 0 else float("inf")
    levels = 1 if g.size and np.all(g == g.flat[0]) else 2
    varies = r.size > 0 and np.ptp(r) > 0
    collapsed = bool(varies and (levels == 1 or cosine < COLLAPSE_COSINE))
    return cosine, sqnr, float(np.max(np.abs(g - r))) if r.size else 0.0, levels, collapsed


def compare_outputs(name: str, runtime: str, ref: list[np.ndarray], got: list[np.ndarray], logits: bool,
                    slicing: OutputSlices | None = None) -> OutputAccuracy:
    """ref/got: one array per held-out batch (same shapes). slicing: the parts to measure apart as well."""
    r = np.concatenate([a.reshape(-1).astype(np.float64) for a in ref])
    g = np.concatenate([a.reshape(-1).astype(np.float64) for a in got])
    cosine, sqnr, max_abs, levels, collapsed = _flat_metrics(r, g)
    per_sample = np.concatenate([_cosine(_rows(a).astype(np.float64), _rows(b).astype(np.float64)) for a, b in zip(ref, got)])
    top1 = None
    if logits:
        agree = [np.argmax(_rows(a), axis=-1) == np.argmax(_rows(b), axis=-1) for a, b in zip(ref, got)]
        top1 = float(np.mean(np.concatenate(agree)))
    parts = []
    if slicing is not None and all(a.ndim > slicing.axis for a in ref):
        for part in slicing.slices:
            cut = [slice(None)] * slicing.axis + [slice(part.start, part.stop)]
            pr = np.concatenate([a[tuple(cut)].reshape(-1).astype(np.float64) for a in ref])
            pg = np.concatenate([b[tuple(cut)].reshape(-1).astype(np.float64) for b in got])
            parts.append(SliceAccuracy(part.label, *_flat_metrics(pr, pg)))
    return OutputAccuracy(name, runtime, cosine, sqnr, max_abs, top1, float(np.mean(per_sample)) if per_sample.size else 1.0,
                          collapsed, levels, parts)


class Reference:
    """The float model's outputs on the held-out batches, computed once and compared with many int8 models."""

    def __init__(self, float_session, batches: list[dict], logits: str | None = None,
                 slicing: dict[str, OutputSlices] | None = None):
        self.names = [o.name for o in float_session.get_outputs()]
        self.batches = batches
        self.logits = logits
        self.slicing = dict(slicing or {})
        self.outputs = [float_session.run(None, b) for b in batches]
        for k, name in enumerate(self.names):
            if name not in self.slicing:
                groups = small_channel_groups([o[k] for o in self.outputs])
                if groups is not None:
                    self.slicing[name] = groups

    def compare(self, runtime: str, int8_session) -> list[OutputAccuracy]:
        got = [int8_session.run(None, b) for b in self.batches]
        return [compare_outputs(name, runtime, [r[k] for r in self.outputs], [g[k] for g in got], self.logits == name,
                                self.slicing.get(name))
                for k, name in enumerate(self.names)]


def measure_accuracy(float_session, int8_sessions: dict, batches: list[dict], logits: str | None = None) -> list[OutputAccuracy]:
    """float_session: the float model (reference); int8_sessions: runtime name -> session of the int8 model."""
    ref = Reference(float_session, batches, logits)
    return [row for runtime, sess in int8_sessions.items() for row in ref.compare(runtime, sess)]
