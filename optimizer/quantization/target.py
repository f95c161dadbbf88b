"""Accuracy targets for `optim quantize --target`: `cosine>=0.995`, `mean_cosine>=0.99`, `sqnr>=30`,
`top1>=0.99`, parsed once and evaluated on the accuracy rows of the int8 model on OptimEP."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import OptimizeError
from .accuracy import OutputAccuracy, lowest

# metric -> (OutputAccuracy field, what it means, the range a threshold must lie in)
METRICS = {
    "cosine": ("cosine", "cosine similarity of the whole output", (-1.0, 1.0)),
    "mean_cosine": ("mean_cosine", "cosine similarity per sample (first axis), averaged", (-1.0, 1.0)),
    "sqnr": ("sqnr_db", "signal-to-quantization-noise ratio in dB", (-math.inf, math.inf)),
    "top1": ("top1", "top-1 agreement with the float model on --logits, a fraction", (0.0, 1.0)),
}
_SYNTAX = re.compile(r"^\s*([a-z_0-9]+)\s*>=\s*([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*$")
EXAMPLES = "cosine>=0.995, mean_cosine>=0.99, sqnr>=30 or top1>=0.99"


@dataclass(frozen=True)
class Target:
    metric: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric}>={self.threshold:g}"

    def value(self, rows: list[OutputAccuracy], runtime: str = "OptimEP") -> float:
        """The measured value: the worst output's (top1: the logits output's) on `runtime`; cosine and SQNR also
        count each part of an output (accuracy.lowest)."""
        field = METRICS[self.metric][0]
        mine = [r for r in rows if r.runtime == runtime]
        if field in ("cosine", "sqnr_db"):
            values = lowest(mine, field)
        else:
            values = [getattr(r, field) for r in mine if getattr(r, field) is not None]
        if not values:
            raise OptimizeError(f"target {self} needs a {self.metric} measurement, and the report has none")
        return min(values)

    def met(self, value: float) -> bool:
        return value >= self.threshold


def parse_target(text: str, logits: str | None = None) -> Target:
    """`metric>=number`, or OptimizeError saying what is accepted."""
    m = _SYNTAX.match(text)
    if not m:
        raise OptimizeError(f"--target {text!r} is not METRIC>=NUMBER; use one of {EXAMPLES}")
    metric, threshold = m.group(1), float(m.group(2))
    if metric not in METRICS:
        raise OptimizeError(f"--target metric {metric!r} is unknown; use one of {', '.join(METRICS)} (e.g. {EXAMPLES})")
    low, high = METRICS[metric][2]
    if not low <= threshold <= high:
        raise OptimizeError(f"--target {metric}>={threshold:g} is out of range: {METRICS[metric][1]} lies in [{low:g}, {high:g}]")
    if metric == "top1" and not logits:
        raise OptimizeError("--target top1>=... needs --logits OUTPUT to say which output holds the class scores")
    return Target(metric, threshold)
