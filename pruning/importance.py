"""Which channels go: weight magnitude, or the first-order Taylor estimate of how much removing a channel changes
what the model computes (Molchanov et al., 2019: (w * dL/dw)^2 per mini-batch, averaged, summed over the channel's
weights in its group; torch-pruning's GroupHessianImportance computes that sum from the mean squared gradients).

The loss L per mini-batch: cross-entropy where the samples have labels; otherwise a random projection of the
outputs, sum(r * output) with r standard normal, fresh per mini-batch. Its squared gradient is, in expectation
over r, the squared change of the outputs themselves (E[(r . J d)^2] = |J d|^2), so the importance measures how far
a channel moves the outputs whatever their scale. The outputs' energy (the obvious unlabelled loss) fails where
outputs are normalised: a sentence embedding's energy is constant, its gradient zero, and the ranking noise.
Squaring per mini-batch (not summing gradients first) keeps a trained model's importances from cancelling out: at
its optimum the mean gradient of its own loss is near zero while each mini-batch's is not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch_pruning as tp
from torch import nn

from .data import Samples
from .errors import PruneError

IMPORTANCES = ("magnitude", "taylor")
TAYLOR_SAMPLES = 512  # samples the Taylor importance averages over
TAYLOR_BATCH = 8  # samples per mini-batch: one squared gradient each (more batches, a steadier average)


def importance_of(kind: str):
    """torch-pruning's scorer for `kind`; "taylor" reads the mean squared gradients from .grad (taylor_gradients)."""
    if kind == "magnitude":
        return tp.importance.MagnitudeImportance(p=2)
    if kind == "taylor":
        return tp.importance.GroupHessianImportance()
    raise PruneError(f"importance {kind!r} is not one of {', '.join(IMPORTANCES)}")


def taylor_gradients(train: Samples, forward: Callable, logits_index: int | None, seed: int = 0
                     ) -> Callable[[nn.Module], None]:
    """gradients(model): sets each parameter's .grad to its mean squared gradient over mini-batches of TAYLOR_BATCH
    of TAYLOR_SAMPLES random training samples (all, when fewer), of the loss the module docstring describes.
    forward(model, samples) -> output tensors."""
    picked = np.random.default_rng(seed).permutation(len(train))[:TAYLOR_SAMPLES]
    subset = train.take(np.sort(picked))  # a random subset: the data may come ordered (by class, by source)

    def fill(model: nn.Module) -> None:
        model.eval()
        projections = torch.Generator().manual_seed(seed)
        params = [p for p in model.parameters() if p.requires_grad]
        squares: dict[nn.Parameter, torch.Tensor] = {}
        batches = 0
        for batch in subset.batches(TAYLOR_BATCH):
            model.zero_grad(set_to_none=True)
            with torch.enable_grad():
                outs = forward(model, batch)
                if logits_index is not None and batch.labels is not None:
                    loss = nn.functional.cross_entropy(outs[logits_index].reshape(len(batch), -1).float(),
                                                       torch.from_numpy(batch.labels))
                else:
                    loss = sum((torch.randn(o.shape, generator=projections) * o.float()).sum() for o in outs)
                loss.backward()
            for p in params:
                if p.grad is not None:
                    squares[p] = squares[p] + p.grad ** 2 if p in squares else p.grad ** 2
            batches += 1
        for p in params:
            p.grad = squares[p] / batches if p in squares else None

    return fill
