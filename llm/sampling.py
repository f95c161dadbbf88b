"""Choosing the next token from a row of logits: greedy, or sampled with temperature, top-k and top-p (nucleus)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampling:
    """temperature 0 is greedy (argmax; top_k and top_p then do nothing). Otherwise the logits are divided by
    temperature, cut to the top_k most likely tokens (0: all) and to the smallest set whose probability reaches
    top_p (1.0: all), and one token is drawn from what is left with the generator seeded by `seed`."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, not {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0: no cut), not {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def next_tokens(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> np.ndarray:
    """One token id per row of `logits` [batch, vocab], as int64."""
    if sampling.greedy:
        return logits.argmax(-1).astype(np.int64)
    return np.array([_sample_row(row, sampling, rng) for row in logits], dtype=np.int64)


def _sample_row(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    scaled = logits.astype(np.float64) / sampling.temperature
    order = np.argsort(-scaled, kind="stable")  # most likely first; ties keep the lower id first
    if sampling.top_k:
        order = order[: sampling.top_k]
    kept = scaled[order]
    probs = np.exp(kept - kept.max())
    probs /= probs.sum()
    if sampling.top_p < 1:
        # The smallest prefix whose mass reaches top_p (at least one token).
        cut = int(np.searchsorted(np.cumsum(probs), sampling.top_p)) + 1
        order, probs = order[:cut], probs[:cut] / probs[:cut].sum()
    return int(order[rng.choice(len(order), p=probs)])
