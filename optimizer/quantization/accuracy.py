"""How much an int8 model differs from its float original on the same inputs: per output the cosine
similarity (of the whole flattened output, and the mean over samples), the signal-to-quantization-noise
ratio (dB), the max absolute error, and, for a named logits output, how often the top-1 class agrees."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class OutputAccuracy:
    output: str
    runtime: str  # where the int8 model ran: "OptimEP" or "CPU EP"
    cosine: float  # of the flattened outputs, all held-out batches together
    sqnr_db: float
    max_abs: float
    top1: float | None = None  # agreement with the float model's argmax, for the logits output
    mean_cosine: float | None = None  # per sample (a row of the first axis), averaged; e.g. sentence embeddings

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        top = f"  top-1 agreement {self.top1:.1%}" if self.top1 is not None else ""
        mean = f" (mean per sample {self.mean_cosine:.5f})" if self.mean_cosine is not None else ""
        return (f"{self.output:<16} on {self.runtime:<8} cosine {self.cosine:.5f}{mean}  SQNR {self.sqnr_db:6.2f} dB  "
                f"max abs {self.max_abs:.4g}{top}")


def _rows(a: np.ndarray) -> np.ndarray:
    """One row per sample: the first axis, or the whole array for scalars and vectors."""
    return a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)


def _cosine(r: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Row-wise cosine of float64 rows; two all-zero rows agree (1), one zero row against another does not (0)."""
    norms = np.linalg.norm(r, axis=-1) * np.linalg.norm(g, axis=-1)
    both_zero = (np.linalg.norm(r, axis=-1) == 0) & (np.linalg.norm(g, axis=-1) == 0)
    return np.where(both_zero, 1.0, np.sum(r * g, axis=-1) / np.maximum(norms, 1e-300))


def compare_outputs(name: str, runtime: str, ref: list[np.ndarray], got: list[np.ndarray], logits: bool) -> OutputAccuracy:
    """ref/got: one array per held-out batch (same shapes)."""
    r = np.concatenate([a.reshape(-1).astype(np.float64) for a in ref])
    g = np.concatenate([a.reshape(-1).astype(np.float64) for a in got])
    noise = np.sum((g - r) ** 2)
    cosine = float(_cosine(r, g))
    per_sample = np.concatenate([_cosine(_rows(a).astype(np.float64), _rows(b).astype(np.float64)) for a, b in zip(ref, got)])
    sqnr = float(10 * np.log10(np.sum(r ** 2) / noise)) if noise > 0 else float("inf")
    top1 = None
    if logits:
        agree = [np.argmax(_rows(a), axis=-1) == np.argmax(_rows(b), axis=-1) for a, b in zip(ref, got)]
        top1 = float(np.mean(np.concatenate(agree)))
    return OutputAccuracy(name, runtime, cosine, sqnr, float(np.max(np.abs(g - r))) if r.size else 0.0, top1,
                          float(np.mean(per_sample)) if per_sample.size else 1.0)


class Reference:
    """The float model's outputs on the held-out batches, computed once and compared with many int8 models."""

    def __init__(self, float_session, batches: list[dict], logits: str | None = None):
        self.names = [o.name for o in float_session.get_outputs()]
        self.batches = batches
        self.logits = logits
        self.outputs = [float_session.run(None, b) for b in batches]

    def compare(self, runtime: str, int8_session) -> list[OutputAccuracy]:
        got = [int8_session.run(None, b) for b in self.batches]
        return [compare_outputs(name, runtime, [r[k] for r in self.outputs], [g[k] for g in got], self.logits == name)
                for k, name in enumerate(self.names)]


def measure_accuracy(float_session, int8_sessions: dict, batches: list[dict], logits: str | None = None) -> list[OutputAccuracy]:
    """float_session: the float model (reference); int8_sessions: runtime name -> session of the int8 model."""
    ref = Reference(float_session, batches, logits)
    return [row for runtime, sess in int8_sessions.items() for row in ref.compare(runtime, sess)]
