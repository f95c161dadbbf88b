"""Causal LMs served with the OpenAI API's text endpoints, continuously batched (llm/batcher.py).

    GET  /v1/models                 the served language models
    POST /v1/completions            prompt (text, or token ids) -> text; "stream": true sends server-sent events
    POST /v1/chat/completions       messages -> the assistant's reply; streamed the same way

A served ONNX file whose metadata says it is a causal LM (exported by `optim export`) gets one ContinuousBatcher,
stepped by a thread of its own: requests join the running batch between decode steps. Request fields read:
model, prompt / messages, max_tokens (16 for completions, up to the model's positions for chat), temperature
(default 1.0, as OpenAI's; 0 is greedy), top_p, seed, stop (a string or a list), stream, ignore_eos (vLLM's
extension: go on past the end id); n must be 1. A request
the queue cannot hold gets 503, one that does not fit 400 in OpenAI's error form. Chat messages become one prompt
through the model's chat template (the tokenizer_config.json `optim export` copies beside it; llm/chat.py), or as
"<|role|>\\ncontent\\n" per message, then "<|assistant|>\\n", for a model without one.
A model without a tokenizer.json beside it takes prompts as token ids and answers with "token_ids" in each choice.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from optim.common.errors import UserError
from optim.llm import Generation, Sampling, load_tokenizer
from optim.llm.chat import chat_prompt, load_chat_template
from optim.llm.batcher import BatcherFull, ContinuousBatcher
from optim.llm.batcher import Request as GenerationRequest

from .models import ServedModel

FINISH = {"eos": "stop", "stop": "stop", "length": "length"}


def language_models(models: dict[str, ServedModel], max_batch: int, max_queue: int,
                    metrics) -> dict[str, LanguageModel]:
    """A LanguageModel for each causal LM among `models` (name -> ServedModel), its sequences watched by `metrics`."""
    language = {name: LanguageModel(name, model, max_batch, max_queue)
                for name, model in models.items() if model.language_model is not None}
    for name, lm in language.items():
        metrics.watch_sequences(name, lm.batcher.pending)
    return language


class LanguageModel:
    """A served causal LM: its tokenizer and a ContinuousBatcher stepped by a daemon thread."""

    def __init__(self, name: str, served: ServedModel, max_batch: int, max_queue: int):
        self.name = name
        self.model = served.language_model
        try:
            self.tokenizer = load_tokenizer(served.path, self.model.info.vocab)
        except UserError:  # no tokenizer.json beside it: prompts as token ids, answers as token ids
            self.tokenizer = None
        self.chat_template = load_chat_template(served.path)  # None: plain "<|role|>" prompts
        self.batcher = ContinuousBatcher(self.model, max_batch=max_batch, max_queue=max_queue,
                                         decode=self.tokenizer.decode if self.tokenizer else None)
        self._thread = threading.Thread(target=self.batcher.run_forever, name=f"optim-llm-{name}", daemon=True)
        self._thread.start()

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise UserError(f"model {self.name!r} has no tokenizer (no tokenizer.json beside it): send the prompt as "
                            "token ids")
        return self.tokenizer.encode(text)

    def close(self) -> None:
        self.batcher.stop()
        self._thread.join(timeout=30)


@dataclass
class _Job:
    """One request on its way through the batcher: what the batcher's thread sends to the event loop, and what its
    answer reports to the model's metrics (`observer`; `started`: when the request arrived)."""

    queue: asyncio.Queue
    prompt_tokens: int
    request: GenerationRequest
    observer: object
    started: float
    first_token_seen: bool = False

    def answered(self, generation: Generation) -> None:
        self.observer.answered(time.perf_counter() - self.started)
        self.observer.generated(self.prompt_tokens, len(generation.token_ids))


class _Stalled(Exception):
    """No token (nor the end) came within the server's timeout: the batcher is stuck or far behind."""


def _error_body(message: str, kind: str) -> dict:
    """An error in OpenAI's form: the body of an error answer, or of an error event in a stream."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _openai_error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(_error_body(message, kind), status_code=status)


def _error_event(message: str) -> str:
    return "data: " + json.dumps(_error_body(message, "server_error")) + "\n\n"


def _stop_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    raise UserError("stop must be a string or a list of strings")


def add_openai_routes(app: FastAPI, models: dict[str, LanguageModel], metrics, timeout_s: float | None = None) -> None:
    """Adds /v1/models, /v1/completions and /v1/chat/completions over `models` (name -> LanguageModel) to app.

    timeout_s bounds the wait for each piece of a generation (the first token, then each next one), not the whole
    of it, which grows with max_tokens: a request that makes no progress for that long gets 504 (a stream: an error
    event) and its sequence is cancelled; so is a stream whose client went away."""

    def lookup(body: dict) -> LanguageModel:
        name = body.get("model")
        if name not in models:
            raise KeyError(f"no language model named {name!r}; served: {', '.join(sorted(models)) or 'none'}")
        return models[name]

    def sampling(body: dict) -> Sampling:
        if body.get("n", 1) != 1:
            raise UserError("n must be 1")
        temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        top_p = float(body.get("top_p") if body.get("top_p") is not None else 1.0)
        seed = body.get("seed")  # none given: a fresh one (two such requests sample independently)
        return Sampling(temperature=temperature, top_p=top_p,
                        seed=int(seed) if seed is not None else secrets.randbits(31))

    def submit(lm: LanguageModel, prompt_ids: list[int], body: dict, default_max: int, started: float) -> _Job:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        max_tokens = next((body[k] for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None),
                          default_max)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise UserError("max_tokens must be a positive integer")
        request = GenerationRequest(
            prompt_ids, max_new_tokens=max_tokens, sampling=sampling(body), stop=_stop_list(body.get("stop")),
            eos=not body.get("ignore_eos", False),
            on_text=(lambda text: loop.call_soon_threadsafe(queue.put_nowait, ("text", text))) if lm.tokenizer else None,
            on_token=lambda _id: loop.call_soon_threadsafe(queue.put_nowait, ("token", None)),  # progress, for timeout_s
            on_done=lambda g: loop.call_soon_threadsafe(queue.put_nowait, ("done", g)))
        lm.batcher.submit(request)
        return _Job(queue, len(prompt_ids), request, metrics.for_model(lm.name), started)

    async def handle(request: Request, chat: bool):
        started = time.perf_counter()
        name = ""
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise UserError("the body must be a JSON object")
            name = str(body.get("model", ""))
            lm = lookup(body)
            if chat:
                prompt_ids = lm.encode(chat_prompt(body.get("messages"), lm.chat_template))
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                    prompt = prompt[0]
                if isinstance(prompt, str):
                    prompt_ids = lm.encode(prompt)
                elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                    prompt_ids = prompt
                else:
                    raise UserError("prompt must be a string or a list of token ids (one prompt per request)")
            default_max = 16 if not chat else max(1, (lm.model.info.max_positions or 4096) - len(prompt_ids))
            job = submit(lm, prompt_ids, body, default_max, started)
        except KeyError as e:
            metrics.failed(name, "unknown_model")
            return _openai_error(404, e.args[0], "not_found_error")
        except BatcherFull as e:
            metrics.failed(name, "queue_full")
            return _openai_error(503, str(e), "server_error")
        except (UserError, ValueError) as e:  # json.JSONDecodeError is a ValueError
            metrics.failed(name, "bad_request")
            return _openai_error(400, str(e))
        ident = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        if body.get("stream"):
            return StreamingResponse(_events(job, ident, created, lm.name, chat, timeout_s,
                                             lambda: metrics.failed(lm.name, "timeout")),
                                     media_type="text/event-stream")
        try:
            generation = await _finished(job, timeout_s)
        except _Stalled:
            metrics.failed(lm.name, "timeout")
            return _openai_error(504, f"no token came within {timeout_s:g} s (the server's --timeout-s): the model is "
                                      f"busy or stuck; the request was cancelled", "server_error")
        if generation.finish_reason == "error":
            metrics.failed(lm.name, "model_error")
            return _openai_error(500, f"the model failed: {generation.error}", "server_error")
        job.answered(generation)
        usage = {"prompt_tokens": job.prompt_tokens, "completion_tokens": len(generation.token_ids),
                 "total_tokens": job.prompt_tokens + len(generation.token_ids)}
        finish = FINISH[generation.finish_reason]
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": generation.text}, "finish_reason": finish}
            return {"id": ident, "object": "chat.completion", "created": created, "model": lm.name,
                    "choices": [choice], "usage": usage}
        choice = {"index": 0, "text": generation.text, "logprobs": None, "finish_reason": finish}
        if lm.tokenizer is None:  # an extension field: the answer as the model's token ids
            choice["token_ids"] = generation.token_ids
        return {"id": ident, "object": "text_completion", "created": created, "model": lm.name, "choices": [choice],
                "usage": usage}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "optim"}
                                           for n in sorted(models)]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await handle(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await handle(request, chat=True)


async def _next(job: _Job, timeout_s: float | None) -> tuple[str, object]:
    """The batcher's next message for `job` (its first token timed for the metrics); _Stalled (the sequence
    cancelled) when none comes within timeout_s."""
    try:
        kind, value = await asyncio.wait_for(job.queue.get(), timeout_s)
    except asyncio.TimeoutError:
        job.request.cancel()
        raise _Stalled() from None
    if kind == "token" and not job.first_token_seen:
        job.first_token_seen = True
        job.observer.first_token(time.perf_counter() - job.started)
    return kind, value


async def _finished(job: _Job, timeout_s: float | None) -> Generation:
    while True:
        kind, value = await _next(job, timeout_s)
        if kind == "done":
            return value


async def _events(job: _Job, ident: str, created: int, model: str, chat: bool, timeout_s: float | None, timed_out):
    """Server-sent events: one chunk per piece of new text, a last chunk with the finish reason, then [DONE]. A
    stall past timeout_s ends the stream with an error event (timed_out() counts it); a client that leaves cancels
    the sequence."""
    try:
        async for event in _stream(job, ident, created, model, chat, timeout_s, timed_out):
            yield event
    finally:  # also when the client went away mid-stream (the generator is closed)
        job.request.cancel()


async def _stream(job: _Job, ident: str, created: int, model: str, chat: bool, timeout_s: float | None, timed_out):
    kind_name = "chat.completion.chunk" if chat else "text_completion"

    def chunk(text: str | None, finish: str | None, first: bool = False) -> str:
        if chat:
            delta = ({"role": "assistant", "content": ""} if first else {}) | ({"content": text} if text else {})
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        return "data: " + json.dumps({"id": ident, "object": kind_name, "created": created, "model": model,
                                      "choices": [choice]}) + "\n\n"

    if chat:
        yield chunk(None, None, first=True)
    while True:
        try:
            kind, value = await _next(job, timeout_s)
        except _Stalled:
            timed_out()
            yield _error_event(f"no token came within {timeout_s:g} s (the server's --timeout-s): the request was "
                               "cancelled")
            return
        if kind == "token":  # progress only: the text comes as "text"
            continue
        if kind == "text":
            yield chunk(value, None)
            continue
        if value.finish_reason == "error":  # the status is sent already: the error goes in the stream
            yield _error_event(f"the model failed: {value.error}")
            return
        job.answered(value)
        yield chunk(None, FINISH[value.finish_reason])
        yield "data: [DONE]\n\n"
        return
