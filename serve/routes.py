"""The HTTP server's routes (FastAPI): the KServe v2 inference protocol over the models, plus /metrics.

    GET  /v2                                   server metadata
    GET  /v2/health/live, /v2/health/ready     200 when live / ready (ready: not shutting down)
    GET  /v2/models/NAME[/versions/V]          model metadata (inputs, outputs: name, datatype, shape; -1 dynamic)
    GET  /v2/models/NAME[/versions/V]/ready    200 when the model is served
    POST /v2/models/NAME[/versions/V]/infer    inference: JSON, or the binary tensor extension
    GET  /metrics                              Prometheus text
    GET  /v1/models, POST /v1/completions, /v1/chat/completions   causal LMs: OpenAI's API (llm.py)

Every infer request goes through its model's Batcher, which runs the session in a worker thread. Errors are
`{"error": "..."}` with a status: 400 for a request that does not fit (naming the tensor and what the model
expects), 404 for an unknown model or version, 503 for a full queue or a server shutting down, 504 for a timeout,
500 when the model itself fails. None of them stops the server. On shutdown (the ASGI lifespan's end, after
uvicorn has let in-flight requests finish) every batcher runs what it still holds, then stops.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

import optim

from .batcher import Batcher, BatcherError, QueueFull, RequestTimeout, ShuttingDown
from .llm import add_openai_routes, language_models
from .metrics import CONTENT_TYPE, Metrics
from .models import ServedModel
from .protocol import HEADER_LENGTH, ProtocolError

SERVER_NAME = "optim"
EXTENSIONS = ["binary_tensor_data"]


@dataclass(frozen=True)
class BatchingOptions:
    """How each model's requests are batched and bounded (see batcher.Batcher); the CLI's defaults."""

    max_batch: int = 8
    max_delay_ms: float = 5.0
    max_queue: int = 256
    timeout_s: float | None = 30.0


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


_REASONS = {QueueFull: "queue_full", RequestTimeout: "timeout", ShuttingDown: "shutting_down"}


def create_app(models: dict[str, ServedModel], options: BatchingOptions = BatchingOptions()) -> FastAPI:
    """The ASGI app serving `models` (name -> ServedModel) with one Batcher each; serve it with uvicorn
    (server.py). The app's state holds `models`, `batchers` and `metrics`."""
    metrics = Metrics()
    batchers: dict[str, Batcher] = {}
    observers = {name: metrics.for_model(name) for name in models}
    for name, model in models.items():
        batchers[name] = Batcher(model.run, batch_axis=model.batch_axis, max_batch=options.max_batch,
                                 max_delay_ms=options.max_delay_ms, max_queue=options.max_queue,
                                 timeout_s=options.timeout_s, observer=observers[name], name=name)
        metrics.watch_queue(name, lambda b=batchers[name]: b.depth)
    state = {"ready": True}
    # Causal LMs also get the OpenAI text endpoints, continuously batched (llm.py).
    language = language_models(models, options.max_batch, options.max_queue, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        state["ready"] = False
        for batcher in batchers.values():
            await batcher.close()
        for lm in language.values():
            lm.close()

    app = FastAPI(title="optim serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.models, app.state.batchers, app.state.metrics = models, batchers, metrics
    app.state.language = language

    def lookup(name: str, version: str | None) -> ServedModel:
        model = models.get(name)
        if model is None:
            metrics.failed("", "unknown_model")
            raise ProtocolError(f"no model named {name!r}; served: {', '.join(sorted(models)) or 'none'}", status=404)
        if version is not None and version != model.version:
            metrics.failed(name, "unknown_model")
            raise ProtocolError(f"model {name!r} has no version {version!r}; served: {model.version}", status=404)
        return model

    @app.exception_handler(ProtocolError)
    async def protocol_error(_request: Request, error: ProtocolError) -> JSONResponse:
        return _error(error.status, str(error))

    @app.get("/v2")
    async def server_metadata():
        return {"name": SERVER_NAME, "version": optim.__version__, "extensions": EXTENSIONS}

    @app.get("/v2/health/live")
    async def live():
        return Response(status_code=200)

    @app.get("/v2/health/ready")
    async def ready():
        return Response(status_code=200 if state["ready"] else 503)

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    async def model_metadata(name: str, version: str | None = None):
        return lookup(name, version).metadata()

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None):
        lookup(name, version)
        return Response(status_code=200 if state["ready"] else 503)

    @app.post("/v2/models/{name}/infer")
    @app.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(request: Request, name: str, version: str | None = None):
        started = time.perf_counter()
        model = lookup(name, version)
        try:
            decoded = model.parse(await request.body(), request.headers.get(HEADER_LENGTH))
        except ProtocolError as e:
            metrics.failed(name, "bad_request")
            return _error(e.status, str(e))
        try:
            outputs = await batchers[name].submit(decoded.inputs)
        except BatcherError as e:
            metrics.failed(name, _REASONS.get(type(e), "model_error"))
            return _error(e.status, str(e))
        except Exception as e:  # noqa: BLE001 - the model's own failure: a 500 with its cause, the server goes on
            metrics.failed(name, "model_error")
            return _error(500, model.failure(e))
        body, headers = model.respond(decoded, outputs)
        observers[name].answered(time.perf_counter() - started)
        return Response(body, headers=headers)

    add_openai_routes(app, language, metrics, options.timeout_s)

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return app
