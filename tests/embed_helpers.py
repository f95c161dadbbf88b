"""What the embedding tests share: the repository's paths, ONNX Runtime's headers, a small model with a
node OptimEP leaves to the CPU EP, and building C++ with the machine's compiler."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
from onnx import helper

from helpers import make_model, rand

ROOT = Path(__file__).resolve().parents[1]


def ort_include_dir() -> Path:
    """ONNX Runtime's C/C++ headers, where the EP's build takes them from (ORT_INCLUDE_DIR, else .deps/)."""
    return Path(os.environ.get("ORT_INCLUDE_DIR") or ROOT / ".deps" / "onnxruntime" / "include")


def mixed_model() -> bytes:
    """Gemm -> Relu -> TopK -> Relu with a dynamic batch: TopK runs on the CPU EP, the rest on OptimEP."""
    rng = np.random.default_rng(16)
    n = helper.make_node
    return make_model(
        [n("Gemm", ["x", "w", "b"], ["h"], transB=1, name="gemm"), n("Relu", ["h"], ["a"], name="relu1"),
         n("TopK", ["a", "k"], ["v", "i"], axis=-1, name="topk"), n("Relu", ["v"], ["y"], name="relu2")],
        {"x": (np.float32, ["batch", 12])}, ["y", "i"],
        {"w": rand(rng, 16, 12), "b": rand(rng, 16), "k": np.array([5], dtype=np.int64)},
    )


def run_checked(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    """Runs cmd, failing the test with its output when it exits non-zero."""
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done
