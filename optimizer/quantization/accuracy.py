"""How much an int8 model differs from its float original on the same inputs: per output the cosine
similarity, the signal-to-quantization-noise ratio (dB), the max absolute error, and, for a named
logits output, how often the top-1 class agrees."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class OutputAccuracy:
    output: str
    runtime: str  # where the int8 model ran: "OptimEP" or "CPU EP"
    cosine: float  # of the flattened outputs (mean over samples when batched per sample)
    sqnr_db: float
    max_abs: float
    top1: float | None = None  # agreement with the float model's argmax, for the logits output

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        top = f"  top-1 agreement {self.top1:.1%}" if self.top1 is not None else ""
        return (f"{self.output:<16} on {self.runtime:<8} cosine {self.cosine:.5f}  SQNR {self.sqnr_db:6.2f} dB  "
                f"max abs {self.max_abs:.4g}{top}")


def compare_outputs(name: str, runtime: str, ref: list[np.ndarray], got: list[np.ndarray], logits: bool) -> OutputAccuracy:
    """ref/got: one array per held-out batch (same shapes)."""
    r = np.concatenate([a.reshape(-1).astype(np.float64) for a in ref])
    g = np.concatenate([a.reshape(-1).astype(np.float64) for a in got])
    noise = np.sum((g - r) ** 2)
    cosine = float(np.dot(r, g) / max(np.linalg.norm(r) * np.linalg.norm(g), 1e-300))
    sqnr = float(10 * np.log10(np.sum(r ** 2) / noise)) if noise > 0 else float("inf")
    top1 = None
    if logits:
        agree = [np.argmax(a.reshape(a.shape[0], -1) if a.ndim > 1 else a[None], axis=-1) ==
                 np.argmax(b.reshape(b.shape[0], -1) if b.ndim > 1 else b[None], axis=-1) for a, b in zip(ref, got)]
        top1 = float(np.mean(np.concatenate(agree)))
    return OutputAccuracy(name, runtime, cosine, sqnr, float(np.max(np.abs(g - r))) if r.size else 0.0, top1)


def measure_accuracy(float_session, int8_sessions: dict, batches: list[dict], logits: str | None = None) -> list[OutputAccuracy]:
    """float_session: the float model (reference); int8_sessions: runtime name -> session of the int8 model."""
    names = [o.name for o in float_session.get_outputs()]
    ref = [float_session.run(None, b) for b in batches]
    rows = []
    for runtime, sess in int8_sessions.items():
        got = [sess.run(None, b) for b in batches]
        for k, name in enumerate(names):
            rows.append(compare_outputs(name, runtime, [r[k] for r in ref], [g[k] for g in got], logits == name))
    return rows
