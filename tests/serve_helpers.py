"""What the `optim serve` tests share: three small models written to a model-repository folder, the direct
session each is checked against, and a server on a free port in a background thread."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
from onnx import helper

from helpers import make_model, rand

import optim

MAX_DELAY_MS = 50.0  # long enough that concurrent clients share batches in the tests


def mlp_model() -> bytes:
    """Gemm -> Relu -> Gemm, x [batch, 32] -> y [batch, 10]: a batch axis, all on OptimEP."""
    rng = np.random.default_rng(17)
    n = helper.make_node
    return make_model([n("Gemm", ["x", "w1", "b1"], ["h"], transB=1), n("Relu", ["h"], ["r"]),
                       n("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                      {"x": (np.float32, ["batch", 32])}, ["y"],
                      {"w1": rand(rng, 64, 32), "b1": rand(rng, 64), "w2": rand(rng, 10, 64), "b2": rand(rng, 10)})


def tokens_model() -> bytes:
    """ids int64 [batch, seq] and mask float [batch, seq] -> y = ids * mask [batch, seq], s = sum over seq
    [batch, 1]: two inputs sharing a batch and a sequence dim, so requests of different lengths cannot share
    a batch."""
    n = helper.make_node
    return make_model([n("Cast", ["ids"], ["f"], to=1), n("Mul", ["f", "mask"], ["y"]),
                       n("ReduceSum", ["y", "axes"], ["s"], keepdims=1)],
                      {"ids": (np.int64, ["batch", "seq"]), "mask": (np.float32, ["batch", "seq"])}, ["y", "s"],
                      {"axes": np.array([1], dtype=np.int64)})


def fixed_model() -> bytes:
    """x [2, 4] -> Relu: fixed shapes, no batch axis (served one request at a time)."""
    return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (np.float32, [2, 4])}, ["y"])


MODELS = {"mlp": mlp_model, "tokens": tokens_model, "fixed": fixed_model}


def write_repository(folder: Path) -> Path:
    """MODELS as NAME.onnx files in `folder` (a model repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        (folder / f"{name}.onnx").write_bytes(build())
    return folder


def direct(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference: the model run alone on its own optim session, outputs by name."""
    sess = optim.session(path, threads=1)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))


@contextlib.contextmanager
def running(paths, **options):
    """optim.serve.app(paths, **options) served on a free port in a thread; yields the BackgroundServer
    (its .url, and .server.should_exit); stopped (gracefully) on exit."""
    import optim.serve
    from optim.serve.server import BackgroundServer

    server = BackgroundServer(optim.serve.app(paths, threads=1, **options)).start()
    try:
        yield server
    finally:
        server.stop()
