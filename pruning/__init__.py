"""Structured pruning of a PyTorch model before export (needs torch and torch-pruning: the `prune` extra).

    from optim.pruning import prune, format_report
    result = prune("resnet18", "resnet18.pruned.pt2", ratio=0.3)          # 30% of each group's channels
    result = prune("mypkg.nets:build", "p.pt2", weights="w.pt", speedup=1.5, data="calib.npz", target="top1>=0.95")
    print("\\n".join(format_report(result)))

Channels of convolutions and linear layers go in dependency groups (torch-pruning's graph: residual adds,
concatenations, depthwise and grouped convolutions, BatchNorm), whole attention heads and feed-forward width in
transformers; the model is then distilled from the original on calibration inputs and checked on held-out ones.
The archive goes to `optim export` like any torch.export file.
"""

from .errors import PruneError, TargetMissed
from .prune import ALLOCATIONS, prune
from .importance import IMPORTANCES
from .report import Latency, PruneResult, format_report

__all__ = ["ALLOCATIONS", "IMPORTANCES", "Latency", "PruneError", "PruneResult", "TargetMissed", "format_report", "prune"]
