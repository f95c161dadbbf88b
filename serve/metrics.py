"""Prometheus metrics of one server (prometheus-client), served as text at /metrics.

Each server has its own registry (two servers in one process, as in the tests, do not share counts). Per model:
requests answered and failed (by reason), the size in rows of each batch run, each request's time in the queue,
each batch's compute time, each request's whole time, and the requests waiting now. Language models' generations
(/v1) add: prompt and generated tokens, the time to each generation's first token, and the sequences waiting or
running in the continuous batch now.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Batch sizes in rows; times from 0.1 ms (a small model's batch) to 10 s (a timeout).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TIME_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Why a request failed: the label values of optim_inference_failures_total.
REASONS = ("bad_request", "unknown_model", "queue_full", "timeout", "shutting_down", "model_error")


class Metrics:
    """The server's metrics; `for_model(name)` gives the observer a model's Batcher reports to."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("optim_inference_requests", "Infer requests answered with outputs", ["model"],
                                registry=self.registry)
        self.failures = Counter("optim_inference_failures", "Infer requests answered with an error, by reason",
                                ["model", "reason"], registry=self.registry)
        self.batch_rows = Histogram("optim_batch_size", "Rows (dim 0) of each batch run", ["model"],
                                    buckets=BATCH_BUCKETS, registry=self.registry)
        self.batch_requests = Histogram("optim_batch_requests", "Requests in each batch run", ["model"],
                                        buckets=BATCH_BUCKETS, registry=self.registry)
        self.queue_time = Histogram("optim_queue_seconds", "Time each request waited before its batch ran",
                                    ["model"], buckets=TIME_BUCKETS, registry=self.registry)
        self.compute_time = Histogram("optim_compute_seconds", "Time each batch took to run", ["model"],
                                      buckets=TIME_BUCKETS, registry=self.registry)
        self.request_time = Histogram("optim_request_seconds", "Time from a request's arrival to its answer",
                                      ["model"], buckets=TIME_BUCKETS, registry=self.registry)
        self.queue_depth = Gauge("optim_queue_depth", "Requests waiting now", ["model"], registry=self.registry)
        self.prompt_tokens = Counter("optim_prompt_tokens", "Prompt tokens of the generations answered", ["model"],
                                     registry=self.registry)
        self.generated_tokens = Counter("optim_generated_tokens", "Tokens generated for the generations answered",
                                        ["model"], registry=self.registry)
        self.first_token_time = Histogram("optim_time_to_first_token_seconds",
                                          "Time from a generation request's arrival to its first token", ["model"],
                                          buckets=TIME_BUCKETS, registry=self.registry)
        self.sequences = Gauge("optim_generation_sequences", "Generations waiting or running in the continuous batch",
                               ["model"], registry=self.registry)

    def for_model(self, name: str) -> _ModelObserver:
        """What model `name`'s Batcher and routes report to."""
        return _ModelObserver(self, name)

    def watch_queue(self, name: str, depth) -> None:
        """depth() (the model's Batcher.depth) is read at each scrape."""
        self.queue_depth.labels(name).set_function(depth)

    def watch_sequences(self, name: str, count) -> None:
        """count() (a language model's ContinuousBatcher.pending) is read at each scrape."""
        self.sequences.labels(name).set_function(count)

    def failed(self, model: str, reason: str) -> None:
        self.failures.labels(model, reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ModelObserver:
    def __init__(self, metrics: Metrics, model: str):
        self._m, self._model = metrics, model

    def batch(self, rows: int, queue_seconds: list[float], compute_seconds: float) -> None:
        self._m.batch_rows.labels(self._model).observe(rows)
        self._m.batch_requests.labels(self._model).observe(len(queue_seconds))
        for seconds in queue_seconds:
            self._m.queue_time.labels(self._model).observe(seconds)
        self._m.compute_time.labels(self._model).observe(compute_seconds)

    def answered(self, seconds: float) -> None:
        self._m.requests.labels(self._model).inc()
        self._m.request_time.labels(self._model).observe(seconds)

    def first_token(self, seconds: float) -> None:
        self._m.first_token_time.labels(self._model).observe(seconds)

    def generated(self, prompt_tokens: int, tokens: int) -> None:
        self._m.prompt_tokens.labels(self._model).inc(prompt_tokens)
        self._m.generated_tokens.labels(self._model).inc(tokens)
