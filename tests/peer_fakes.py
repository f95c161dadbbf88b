"""Stand-ins for OpenVinoRunner that `optim bench --vs openvino` runs in its peer's child process (so they live in an
importable module, and each behaviour is a class of its own: the child imports them afresh)."""

from __future__ import annotations

import os
import signal

import numpy as np


class FailsToLoad:
    def __init__(self, model, threads, precision="f32"):
        raise RuntimeError("Exception from src/inference/src/cpp/core.cpp:132:\n\nunsupported op: FancyOp\n")


class FailsOnItsFourthRun:
    def __init__(self, model, threads, precision="f32"):
        self.version, self.calls = "0.0", 0

    def run(self, _outputs, feeds):
        self.calls += 1
        if self.calls >= 4:
            raise RuntimeError("inference failed: out of fake memory")
        return [np.zeros((1, 4), np.float32)]


class CrashesLoading:
    def __init__(self, model, threads, precision="f32"):
        os.kill(os.getpid(), signal.SIGSEGV)


class CrashesOnItsSecondRun(FailsOnItsFourthRun):
    def run(self, outputs, feeds):
        if self.calls >= 1:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().run(outputs, feeds)
