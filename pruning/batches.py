"""Mini-batches for the recovery, and which of their positions count.

A transformer's text samples come padded to one length with a token mask beside them (an `attention_mask`:
2-D, 0/1, an input whose name says mask). Then
- the hidden-state terms of the loss count real tokens only: padding's hidden states feed no output anyone reads
  (a mean over the real tokens, per-token outputs at real positions), yet were a third of the positions matched
  on MiniLM's sentences (20 real tokens of 32 on average);
- each epoch's batches are grouped by length (sorted within pools of POOL batches, then shuffled) and cut to
  their longest sample: a third fewer tokens a step there (~15% less time). Cutting is used only where it is
  exact: the original's outputs on a probe batch must not change when the trailing padding goes.
Without a token mask: random mini-batches of the whole width, every position counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from .data import Samples

POOL = 16  # batches sorted by length together: enough to group lengths, few enough to keep batches random
PROBE = 8  # samples the cut is checked on
CUT_TOLERANCE = 1e-4  # relative to the output's largest magnitude


def token_mask_name(samples: Samples) -> str | None:
    """The input holding a 0/1 token mask (see the module docstring), or None."""
    for name, array in samples.inputs.items():
        integer = array.dtype == bool or np.issubdtype(array.dtype, np.integer)
        if "mask" in name.lower() and array.ndim == 2 and integer and np.isin(array, (0, 1)).all():
            return name
    return None


def cut_padding(batch: Samples, mask: str) -> Samples:
    """`batch` without the trailing positions that are padding in every sample (of each input shaped like the mask)."""
    m = batch.inputs[mask]
    used = np.flatnonzero(m.any(0))
    length = int(used[-1]) + 1 if len(used) else 1
    if length == m.shape[1]:
        return batch
    return Samples({k: v[:, :length] if v.shape == m.shape else v for k, v in batch.inputs.items()}, batch.labels)


def cutting_is_exact(model, samples: Samples, mask: str, forward: Callable) -> bool:
    """Whether `model`'s outputs on PROBE samples (the shortest, so the cut removes the most) stay the same when their
    trailing padding goes: sequence outputs compared on the positions kept."""
    shortest = np.sort(np.argsort(samples.inputs[mask].sum(1), kind="stable")[:PROBE])
    whole = samples.take(shortest)
    cut = cut_padding(whole, mask)
    kept = cut.inputs[mask].shape[1]
    if kept == whole.inputs[mask].shape[1]:
        return False  # nothing to cut anywhere: no gain to check for
    with torch.no_grad():
        full, short = forward(model, whole), forward(model, cut)
    for f, s in zip(full, short):
        if f.shape != s.shape:
            if f.dim() < 2 or f.shape[1] != whole.inputs[mask].shape[1] or f.shape[2:] != s.shape[2:]:
                return False
            f = f[:, :kept]
        scale = float(f.abs().max()) or 1.0
        if f.shape != s.shape or float((f - s).abs().max()) > CUT_TOLERANCE * scale:
            return False
    return True


def random_batches(samples: Samples, size: int, rng: np.random.Generator) -> Iterator[Samples]:
    """Endless independent random mini-batches of `size` (all samples when fewer)."""
    n = len(samples)
    while True:
        yield samples.take(np.sort(rng.choice(n, size=min(size, n), replace=False)))


def length_batches(samples: Samples, size: int, mask: str, rng: np.random.Generator) -> Iterator[Samples]:
    """Endless epochs of mini-batches of similar length, each cut to its longest sample (see the module docstring)."""
    n = len(samples)
    size = min(size, n)
    lengths = samples.inputs[mask].sum(1)
    while True:
        order = rng.permutation(n)
        batches = []
        for start in range(0, n, size * POOL):
            pool = order[start:start + size * POOL]
            pool = pool[np.argsort(lengths[pool], kind="stable")]
            batches += [pool[i:i + size] for i in range(0, len(pool) - size + 1, size)]
        for b in (batches[i] for i in rng.permutation(len(batches))):
            yield cut_padding(samples.take(np.sort(b)), mask)


def token_weights(batch: Samples, mask: str | None) -> torch.Tensor | None:
    """The batch's token mask as float weights ([batch, sequence]), or None without one."""
    return None if mask is None else torch.from_numpy(batch.inputs[mask]).float()
