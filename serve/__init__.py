"""`optim serve`: ONNX models on OptimEP behind the KServe v2 inference protocol (HTTP, what Triton's clients
speak), with dynamic batching and Prometheus metrics; scale-out as a Ray Serve deployment (optim.serve.ray).

    import optim.serve
    app = optim.serve.app(["model.onnx"], threads=1, max_batch=8)   # an ASGI app (FastAPI)
    optim.serve.run(["model.onnx"], port=8000)                      # serve it until Ctrl-C

Needs the `serve` extra (fastapi, uvicorn, prometheus-client): pip install 'optim[serve]'. The protocol codec
(protocol.py), model loading (models.py) and batching functions (batching.py) need only numpy and the runtime.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from optim.common.errors import UserError

from .models import ModelLoadError, ServedModel, load_all, model_files
from .protocol import ProtocolError

EXTRA_PACKAGES = ("fastapi", "uvicorn", "prometheus_client")


class MissingExtraError(UserError):
    """A package of the `serve` (or `ray`) extra is not installed."""


def require(packages=EXTRA_PACKAGES, extra: str = "serve") -> None:
    """MissingExtraError naming the extra when one of `packages` cannot be imported."""
    for package in packages:
        try:
            importlib.import_module(package)
        except ImportError:
            raise MissingExtraError(f"serving needs {package}: pip install 'optim[{extra}]'") from None


def app(models, *, threads: int | None = None, max_batch: int = 8, max_delay_ms: float = 5.0, max_queue: int = 256,
        timeout_s: float | None = 30.0, **ep_options):
    """The ASGI app (FastAPI) serving `models`: ONNX files or model-repository folders (a list of paths), or a
    dict name -> ServedModel already loaded. threads: intra-op threads of each model's session; the batching
    options as batcher.Batcher takes them; ep_options: OptimEP's (isa=...). ModelLoadError for a bad path."""
    require()
    from .routes import BatchingOptions, create_app

    if not isinstance(models, dict):
        models = load_all([models] if isinstance(models, (str, Path)) else list(models), threads=threads, **ep_options)
    return create_app(models, BatchingOptions(max_batch, max_delay_ms, max_queue, timeout_s))


def run(models, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info", **options) -> None:
    """Serves `models` (as app() takes them, with its options) on host:port until SIGINT/SIGTERM, then shuts
    down gracefully (in-flight requests finish)."""
    served = app(models, **options)
    from .server import serve_forever

    serve_forever(served, host=host, port=port, log_level=log_level)


__all__ = ["MissingExtraError", "ModelLoadError", "ProtocolError", "ServedModel", "app", "load_all", "model_files",
           "require", "run"]
