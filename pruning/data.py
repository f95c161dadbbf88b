"""The inputs pruning learns from and is judged on: samples along the first axis, split into a training part
(importance, distillation) and a held-out part (accuracy, --target).

From `--data FILE.npz`: one array per model input, samples along the first axis, and optionally `labels` (int
class ids, one per sample). Without it: the zoo's real examples where it has them (MiniLM's sentences), else
random inputs of the spec's shapes (floats standard normal, integers in the input's range).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from optim.exporter.examples import load_example_inputs, random_inputs
from optim.exporter.errors import ExportError
from optim.exporter.specs import InputSpec

from .errors import PruneError

LABELS = "labels"


@dataclass
class Samples:
    """Input arrays by name, samples along axis 0, and their labels (or None)."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None = None

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def take(self, index) -> "Samples":
        return Samples({k: v[index] for k, v in self.inputs.items()}, None if self.labels is None else self.labels[index])

    def split(self, holdout: float, seed: int) -> tuple["Samples", "Samples"]:
        """(training, held-out): a shuffled cut, at least one sample on each side."""
        n = len(self)
        if n < 2:
            raise PruneError(f"pruning needs at least 2 samples (one to learn from, one to check on); got {n}")
        order = np.random.default_rng(seed).permutation(n)
        held = min(n - 1, max(1, int(round(n * holdout))))
        return self.take(np.sort(order[held:])), self.take(np.sort(order[:held]))

    def batches(self, size: int):
        for start in range(0, len(self), size):
            yield self.take(slice(start, start + size))


def load_samples(specs: list[InputSpec], data: str | os.PathLike | None, count: int, seed: int,
                 int_ranges: dict | None = None, examples=None) -> Samples:
    """Samples for `specs` (see the module docstring). examples(seed, batch) -> {name: array}: the source's own."""
    if data is not None:
        return _from_file(specs, os.fspath(data))
    if examples is not None:
        return Samples(examples(seed=seed, batch=count))
    batched = [InputSpec(s.name, (count, *s.shape[1:]), s.dtype, s.dynamic, s.value) for s in specs]
    return Samples(random_inputs(batched, seed=seed, int_ranges=int_ranges))


def _from_file(specs: list[InputSpec], path: str) -> Samples:
    try:
        arrays = load_example_inputs(path)
    except ExportError as e:
        raise PruneError(str(e).replace("example inputs", "--data")) from None
    labels = arrays.pop(LABELS, None)
    names = [s.name for s in specs]
    missing = [n for n in names if n not in arrays]
    if missing:
        raise PruneError(f"--data {path} has no array for input(s) {', '.join(missing)} (it has "
                         f"{', '.join(arrays) or 'none'}): save one array per input, samples along the first axis"
                         f"{', and labels=' if labels is None else ''}")
    extra = [k for k in arrays if k not in names]
    if extra:
        raise PruneError(f"--data {path} has arrays the model does not take: {', '.join(extra)} (inputs: "
                         f"{', '.join(names)}; `{LABELS}` holds class ids)")
    counts = {len(arrays[n]) for n in names if arrays[n].ndim}
    if len(counts) != 1:
        raise PruneError(f"--data {path}: the inputs hold different numbers of samples along the first axis "
                         f"({', '.join(f'{n}: {arrays[n].shape}' for n in names)})")
    for spec in specs:
        a = arrays[spec.name]
        if a.ndim != len(spec.shape):
            raise PruneError(f"--data {path}: {spec.name} has shape {a.shape}, but the model takes {len(spec.shape)}-d "
                             f"input like {spec.dims()} (samples along the first axis)")
        arrays[spec.name] = a.astype(spec.dtype, copy=False)
    n = counts.pop()
    if labels is not None:
        if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
            raise PruneError(f"--data {path}: `{LABELS}` must hold one integer class id per sample ({n}), "
                             f"got {labels.dtype} {labels.shape}")
        labels = labels.astype(np.int64)
    return Samples({n_: arrays[n_] for n_ in names}, labels)
