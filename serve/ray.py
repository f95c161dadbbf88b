"""Scale-out on Ray Serve: a model as a Ray Serve deployment with replicas, batched by Ray Serve's own
`@serve.batch`, speaking the same KServe v2 infer protocol over Ray Serve's HTTP proxy.

    import ray, optim.serve.ray
    ray.init(num_cpus=4)
    handle = optim.serve.ray.deploy("model.onnx", replicas=2, max_batch=8)   # serve.run under the hood
    outputs = handle.infer.remote({"x": x}).result()                        # from Python, batched
    # or HTTP: POST http://127.0.0.1:8000/v2/models/model/infer (GET .../model: metadata, .../model/ready)

Each replica loads its own OptimEP session (`threads` intra-op threads) and runs batches in a worker thread. Ray's
batch holds up to `max_batch` requests (not rows) gathered for up to `max_delay_ms`; requests of different shapes
in one batch run as separate groups (batching.run_groups). Needs the `ray` extra: pip install 'optim[ray]'.

Causal LMs (exported by `optim export`) are also deployed together as one more application at route prefix "/":
OpenAI's /v1/models, /v1/completions and /v1/chat/completions (serve/llm.py's routes, streaming included), each
replica generating with its own continuous batcher of up to `max_batch` sequences, Ray spreading the requests:

    handle = optim.serve.ray.deploy_language_models({"llama": ("llama.onnx", "1")}, replicas=2)
"""

from __future__ import annotations

import asyncio

from optim.common.errors import UserError

from . import require
from .batching import Tensors, run_groups
from .models import VERSION, is_causal_lm, load, model_files
from .protocol import HEADER_LENGTH, ProtocolError

require(("ray", "starlette"), extra="ray")

# Absolute imports of the real Ray: this module's own name (optim.serve.ray) does not shadow it in Python 3.
import ray  # noqa: E402
from ray import serve  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402

ONGOING_DEFAULT = 5  # Ray Serve's max_ongoing_requests when not set
LANGUAGE_APP = "openai"  # the Ray Serve application of the causal LMs' /v1 endpoints


@serve.deployment
class OptimModel:
    """One replica: a model loaded into an OptimEP session. `infer(inputs)` (a DeploymentHandle method) and HTTP
    (__call__) both go through Ray's batching."""

    def __init__(self, path: str, name: str, version: str, threads: int | None, max_batch: int, max_delay_ms: float,
                 ep_options: dict):
        self.model = load(path, name, version, threads=threads, **ep_options)
        self.counts = {"batches": 0, "requests": 0}
        self._batched.set_max_batch_size(max_batch)
        self._batched.set_batch_wait_timeout_s(max_delay_ms / 1e3)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
    async def _batched(self, requests: list[Tensors]) -> list:
        self.counts["batches"] += 1
        self.counts["requests"] += len(requests)
        # The session blocks: run it in a worker thread, off the replica's event loop.
        return await asyncio.to_thread(run_groups, self.model.run, requests, self.model.batch_axis)

    async def infer(self, inputs: Tensors) -> Tensors:
        """All outputs for `inputs` (checked against the model first: ProtocolError naming the tensor)."""
        self.model.check_inputs(inputs)
        result = await self._batched(inputs)
        if isinstance(result, Exception):
            raise result
        return result

    def metadata(self) -> dict:
        return self.model.metadata()

    def batch_counts(self) -> dict:
        """This replica's batches run and requests in them so far."""
        return dict(self.counts)

    async def __call__(self, request: Request) -> Response:
        """KServe v2 under the route prefix /v2/models/NAME: GET (metadata), GET .../ready, POST .../infer."""
        path = request.url.path.rstrip("/")
        if request.method == "GET":
            return Response(status_code=200) if path.endswith("/ready") else JSONResponse(self.model.metadata())
        if request.method != "POST" or not path.endswith("/infer"):
            return JSONResponse({"error": f"{request.method} {path} is not served"}, status_code=404)
        try:
            decoded = self.model.parse(await request.body(), request.headers.get(HEADER_LENGTH))
            outputs = await self.infer(decoded.inputs)
        except ProtocolError as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        except Exception as e:  # noqa: BLE001 - the model's own failure: a 500 with its cause
            return JSONResponse({"error": self.model.failure(e)}, status_code=500)
        body, headers = self.model.respond(decoded, outputs)
        return Response(body, headers=headers)


@serve.deployment
@serve.ingress()
class OptimLanguageModels:
    """One replica: every causal LM of the deployment loaded (cache in place), each with its continuous batcher
    stepped by a thread of its own, behind the OpenAI text endpoints (an ASGI app built in the replica)."""

    def __init__(self, files: dict, threads: int | None, max_batch: int, max_queue: int, timeout_s: float | None,
                 ep_options: dict):
        from .llm import language_models
        from .metrics import Metrics

        self.metrics = Metrics()
        self.timeout_s = timeout_s
        served = {name: load(path, name, version, threads=threads, **ep_options)
                  for name, (path, version) in files.items()}
        self.models = language_models(served, max_batch, max_queue, self.metrics)

    def __serve_build_asgi_app__(self):
        from fastapi import FastAPI

        from .llm import add_openai_routes

        app = FastAPI(title="optim serve (OpenAI text endpoints)", docs_url=None, redoc_url=None, openapi_url=None)
        add_openai_routes(app, self.models, self.metrics, self.timeout_s)
        return app


def language_models_deployment(files: dict, *, replicas: int = 1, max_batch: int = 8, max_queue: int = 256,
                               timeout_s: float | None = 30.0, threads: int | None = 1, num_cpus: float = 1.0,
                               **ep_options):
    """The Ray Serve application of the causal LMs `files` names (name -> (ONNX file, version)): `replicas`
    replicas of OptimLanguageModels, each reserving `num_cpus` of Ray's CPUs; pass it to serve.run."""
    if replicas < 1 or max_batch < 1:
        raise UserError("replicas and max_batch must be >= 1")
    files = {name: (str(path), version) for name, (path, version) in files.items()}
    return OptimLanguageModels.options(num_replicas=replicas, ray_actor_options={"num_cpus": num_cpus},
                                       max_ongoing_requests=max(ONGOING_DEFAULT, 2 * max_queue)).bind(
        files, threads, max_batch, max_queue, timeout_s, ep_options)


def deploy_language_models(files: dict, **options):
    """Deploys the causal LMs `files` names (name -> (file, version)) on the running Ray instance as the application
    "openai" at route prefix "/" (its routes are /v1/...); returns its DeploymentHandle."""
    return serve.run(language_models_deployment(files, **options), name=LANGUAGE_APP, route_prefix="/")


def deployment(path, *, name: str | None = None, version: str = VERSION, replicas: int = 1, max_batch: int = 8,
               max_delay_ms: float = 5.0, threads: int | None = 1, num_cpus: float = 1.0, **ep_options):
    """The Ray Serve application for one ONNX file: `replicas` replicas of OptimModel, each reserving `num_cpus`
    of Ray's CPUs; pass it to serve.run (or use deploy)."""
    if replicas < 1 or max_batch < 1:
        raise UserError("replicas and max_batch must be >= 1")
    # A replica takes at most max_ongoing_requests at once (Ray's default 5): room for a full batch gathering
    # while the one before it runs.
    return OptimModel.options(num_replicas=replicas, ray_actor_options={"num_cpus": num_cpus},
                              max_ongoing_requests=max(ONGOING_DEFAULT, 2 * max_batch)).bind(
        str(path), name or _stem(path), version, threads, max_batch, max_delay_ms, ep_options)


def _ep_options(options: dict) -> dict:
    """The OptimEP options among run()'s options (those deployment() does not name)."""
    named = {"name", "version", "replicas", "max_batch", "max_delay_ms", "threads", "num_cpus"}
    return {k: v for k, v in options.items() if k not in named}


def _stem(path) -> str:
    from pathlib import Path

    return Path(path).stem


def deploy(path, *, name: str | None = None, **options):
    """Deploys one model (deployment's options) on the running Ray instance under /v2/models/NAME; returns its
    DeploymentHandle (handle.infer.remote(inputs).result() -> outputs)."""
    name = name or _stem(path)
    return serve.run(deployment(path, name=name, **options), name=name, route_prefix=f"/v2/models/{name}")


def run(paths, *, host: str = "127.0.0.1", port: int = 8000, num_cpus: int | None = None, **options) -> None:
    """`optim serve --ray`: starts a local Ray instance (or joins the one RAY_ADDRESS names), deploys every
    model `paths` name with Ray Serve's HTTP proxy on host:port (the causal LMs also on /v1), and serves until
    Ctrl-C."""
    import signal
    import threading

    files = model_files(paths)  # bad paths fail before Ray starts
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ray.init(num_cpus=num_cpus, include_dashboard=False)
    try:
        serve.start(http_options={"host": host, "port": port})
        for name, (file, version) in files.items():
            deploy(file, name=name, version=version, **options)
        language = {name: entry for name, entry in files.items() if is_causal_lm(entry[0])}
        if language:
            deploy_language_models(language, replicas=options.get("replicas", 1), max_batch=options.get("max_batch", 8),
                                   threads=options.get("threads", 1), **_ep_options(options))
        stop.wait()
    except KeyboardInterrupt:  # Ctrl-C, also while deploying (a model answers before serve.run returns)
        pass
    finally:
        serve.shutdown()
        ray.shutdown()
