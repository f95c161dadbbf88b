"""Recovering a pruned model's accuracy: BatchNorm statistics re-estimated, then distillation from the original.

The original model's outputs on each mini-batch are the targets (no labels needed): the loss is each output's
squared error relative to the target's mean square, plus the same averaged over the normalisation layers whose
outputs kept their shape (a transformer's hidden state after every block; real tokens only where the samples have
a token mask), plus cross-entropy on the logits output where the data has labels. Adam for a bounded number of
steps on mini-batches (batches.py: random, or grouped by length and cut to their longest sample); the held-out
score is checked every `EVALUATIONS`th of the run and the best state is the one kept (more steps never make the
result worse than fewer). Dropout stays off and BatchNorm keeps the re-estimated statistics while training (few
samples would make batch statistics noisy).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .batches import cutting_is_exact, length_batches, random_batches, token_mask_name, token_weights
from .data import Samples

EVALUATIONS = 10  # held-out checks per run
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass
class Recovery:
    steps: int  # steps run
    seconds: float
    best_step: int  # the step whose state was kept (0: the pruned model as it was)
    scores: list[tuple[int, float]]  # (step, held-out score) at each check
    stopped_early: bool = False  # the target held, so the run stopped before its last step

    def to_dict(self) -> dict:
        return {"steps": self.steps, "seconds": round(self.seconds, 2), "best_step": self.best_step,
                "scores": [[s, v] for s, v in self.scores], "stopped_early": self.stopped_early}


def recalibrate_batchnorm(model: nn.Module, samples: Samples, batch_size: int, forward: Callable) -> bool:
    """Re-estimates every BatchNorm's running mean and variance on `samples` (a pruned layer's inputs changed);
    False when the model has none."""
    norms = [m for m in model.modules() if isinstance(m, _NORMS)]
    if not norms:
        return False
    saved = [(m.momentum, m.training) for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over every batch
        m.train()
    with torch.no_grad():
        for batch in samples.batches(batch_size):
            forward(model, batch)
    for m, (momentum, training) in zip(norms, saved):
        m.momentum = momentum
        m.train(training)
    return True


class Features:
    """Outputs of named modules, caught by forward hooks while a model runs (`with Features(model, names) as f:`)."""

    def __init__(self, model: nn.Module, names: list[str]):
        modules = dict(model.named_modules())
        self.caught: dict[str, torch.Tensor] = {}
        self._hooks = [modules[n].register_forward_hook(self._catch(n)) for n in names]

    def _catch(self, name):
        def hook(_module, _inputs, output):
            if isinstance(output, torch.Tensor):
                self.caught[name] = output
        return hook

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()


def matching_features(teacher: nn.Module, student: nn.Module, probe: Samples, forward: Callable) -> list[str]:
    """Names of the normalisation layers (LayerNorm, and BatchNorm of unpruned width) whose outputs keep their shape
    in the pruned model: a transformer's hidden state after every block. Matching them too gives the student a
    signal per layer, where the final output alone (a normalised sentence embedding) gives a weak one."""
    kinds = (nn.LayerNorm, *_NORMS)
    names = [n for n, m in teacher.named_modules() if isinstance(m, kinds)]
    with Features(teacher, names) as t, Features(student, names) as s, torch.no_grad():
        forward(teacher, probe)
        forward(student, probe)
    return [n for n in names if n in t.caught and n in s.caught and t.caught[n].shape == s.caught[n].shape]


def _relative_mse(got: torch.Tensor, want: torch.Tensor, tokens: torch.Tensor | None = None) -> torch.Tensor:
    """Squared error relative to the target's mean square; over the positions `tokens` weighs ([batch, sequence])
    where got's leading axes are those."""
    if tokens is None or tuple(got.shape[:2]) != tuple(tokens.shape):
        return torch.mean((got - want) ** 2) / (torch.mean(want ** 2) + 1e-12)
    w = tokens.reshape(*tokens.shape, *([1] * (got.dim() - 2))).to(got.dtype)
    return torch.sum(w * (got - want) ** 2) / (torch.sum(w * want ** 2) + 1e-12)


def distill(student: nn.Module, teacher: nn.Module, train: Samples, *, steps: int, batch_size: int, lr: float,
            forward: Callable, score: Callable[[nn.Module], float], logits_index: int | None, seed: int,
            enough: Callable[[float], bool] | None = None, progress=None) -> Recovery:
    """Trains `student` toward `teacher`'s outputs on mini-batches of `train`, and toward its hidden states where
    they keep their shape (matching_features).

    forward(model, samples) -> output tensors; score(model) -> the held-out score (higher is better); enough(score):
    stop once true. progress(line) gets a line at each check."""
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    best_score = score(student)
    best_state, best_step = copy.deepcopy(student.state_dict()), 0
    scores = [(0, best_score)]
    if steps <= 0 or (enough is not None and enough(best_score)):
        return Recovery(0, time.perf_counter() - t0, 0, scores, stopped_early=steps > 0)
    rng = np.random.default_rng(seed)
    features = matching_features(teacher, student, train.take(slice(0, 2)), forward)
    mask = token_mask_name(train)
    if mask is not None and cutting_is_exact(teacher, train, mask, forward):
        batches = length_batches(train, batch_size, mask, rng)
        say(f"recovery: hidden states compared on real tokens ({mask}); batches grouped by length, padding cut")
    else:
        batches = random_batches(train, batch_size, rng)
        if mask is not None:
            say(f"recovery: hidden states compared on real tokens ({mask}); padding kept (none to cut, or the "
                f"outputs change without it)")
    params = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    every = max(1, steps // EVALUATIONS)
    student.eval()
    teacher.eval()
    stopped, step = False, 0
    with Features(teacher, features) as taught, Features(student, features) as learnt:
        for step in range(1, steps + 1):
            batch = next(batches)
            tokens = token_weights(batch, mask)
            with torch.no_grad():
                want = forward(teacher, batch)
            with torch.enable_grad():
                got = forward(student, batch)
                loss = sum(_relative_mse(g, w) for g, w in zip(got, want))
                if features:
                    loss = loss + sum(_relative_mse(learnt.caught[f], taught.caught[f], tokens)
                                      for f in features) / len(features)
                if logits_index is not None and batch.labels is not None:
                    loss = loss + nn.functional.cross_entropy(got[logits_index].reshape(len(batch), -1),
                                                              torch.from_numpy(batch.labels))
                optimizer.zero_grad()
                loss.backward()
            loss = float(loss.detach())
            learnt.caught.clear()
            optimizer.step()
            schedule.step()
            if step % every == 0 or step == steps:
                value = score(student)
                scores.append((step, value))
                if value > best_score:
                    best_score, best_state, best_step = value, copy.deepcopy(student.state_dict()), step
                say(f"recovery: step {step}/{steps}  loss {loss:.4g}  held-out {value:.5f} (best {best_score:.5f})")
                if enough is not None and enough(best_score):
                    stopped = step < steps
                    break
    student.load_state_dict(best_state)
    return Recovery(step, time.perf_counter() - t0, best_step, scores, stopped)
