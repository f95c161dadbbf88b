"""Compiles shared between graphs Dynamo captures again with the same code.

Dynamo guards on the grad mode (none / no_grad / inference_mode) and on a few other global flags, and captures
the model again when one changes, though the graph computes the same thing: an inference script that warms up
under no_grad and serves under inference_mode would pay the whole ONNX compile (seconds per graph) twice. A
GraphRunner looks here first: a live runner with the same FX code, inputs, options and the same weight tensors
(unchanged since) lends it its session."""

from __future__ import annotations

import threading
import weakref

import torch


def reuse_key(gm: torch.fx.GraphModule, plan, args: list, options, frame_name: str) -> tuple:
    """What must match for two graphs to share a compile: the code, the frame, the user tensors' dtypes and static
    dims (the dynamic ones are free in both) and the options (calibration samples by identity)."""
    inputs = tuple((str(args[p].dtype), tuple(-1 if a in axes else int(d) for a, d in enumerate(args[p].shape)))
                   for p, axes in zip(plan.tensor_positions, plan.dynamic_axes))
    chosen = (options.quantize, id(options.calib), options.threads, options.target, options.op_types, options.isa,
              options.precision)
    return gm.code, frame_name, inputs, chosen


class CompileCache:
    """Live GraphRunners by reuse_key; a runner whose model was dropped drops out (weak references)."""

    def __init__(self):
        self._runners: dict[tuple, list[weakref.ref]] = {}
        self._lock = threading.Lock()

    def find(self, key: tuple, args: list):
        """A compiled runner under `key` whose weights are the tensors in `args`, unchanged; None if none."""
        with self._lock:
            alive = [r for r in self._runners.get(key, []) if r() is not None]
            self._runners[key] = alive
            for ref in alive:
                runner = ref()
                if runner is not None and runner.compiled is not None and not runner.weights_changed(args):
                    return runner
        return None

    def add(self, key: tuple, runner) -> None:
        with self._lock:
            self._runners.setdefault(key, []).append(weakref.ref(runner))
