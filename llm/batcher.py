"""Continuous batching: sequences join the running batch between decode steps and leave it when they finish, so
one decode step serves every sequence in flight instead of one request at a time.

Each step: the waiting sequences (up to max_batch in all) are prefilled together, their caches left-padded to the
running batch's length (or the batch's to theirs) and stacked onto it; then every running row takes one token
(sampled with its own settings and generator) and one decode step runs for the rows still going. A row that ends
(length, end id, stop string) leaves the batch, and cache columns no remaining row uses are cut. Left padding is
masked (attention_mask 0) and skipped by the position ids, so a row's logits are those it would get alone.
The cache of all rows is bounded by max_cache_tokens (rows x cache length; on OptimEP the buffers that keep it in
place hold up to twice the positions in use); submit() refuses (BatcherFull) when the queue is full.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from optim.common.errors import UserError

from .generate import Generation, stream_text, take_token
from .model import Batch, CausalLM
from .sampling import Sampling, next_tokens


class BatcherFull(RuntimeError):
    """The queue of waiting sequences is full: the caller should answer 503 and let the client retry."""


@dataclass
class Request:
    """One sequence to generate: token ids, how many tokens at most, sampling, stop strings, whether end ids end it.
    on_text(new_text) streams its text, on_token(id) each token; on_done(generation) gets the result (all called
    from the batcher's thread). cancel() (from any thread) drops it before its next step: it ends with finish_reason "cancelled"."""

    prompt_ids: list[int]
    max_new_tokens: int = 16
    sampling: Sampling = Sampling()
    stop: list[str] = field(default_factory=list)
    eos: bool = True
    on_text: Callable[[str], None] | None = None
    on_done: Callable[[Generation], None] | None = None
    on_token: Callable[[int], None] | None = None  # each generated token id, as it is taken (a sign of progress)
    cancelled: bool = False

    def cancel(self) -> None:
        """Nobody waits for this sequence any more (a client gone, a request timed out): stop spending steps on it."""
        self.cancelled = True


@dataclass
class _Row:
    request: Request
    generation: Generation
    rng: np.random.Generator
    sent: int = 0  # characters of text passed to on_text


@dataclass
class BatcherStats:
    steps: int = 0          # decode steps run
    prefills: int = 0       # prefill runs (each takes every sequence waiting then)
    tokens: int = 0         # tokens generated
    finished: int = 0
    peak_rows: int = 0      # the most rows one decode step ran


class ContinuousBatcher:
    """Runs `model` over submitted requests in continuous batches. decode(ids) -> text is needed for stop strings
    and streamed text. Call step() in a loop (or run_forever() in a thread); each call admits, samples and decodes
    once."""

    def __init__(self, model: CausalLM, *, max_batch: int = 8, max_queue: int = 256, max_cache_tokens: int = 1 << 16,
                 decode: Callable[[list[int]], str] | None = None):
        if max_batch < 1:
            raise UserError(f"max_batch must be at least 1, not {max_batch}")
        self.model = model
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.max_cache_tokens = max_cache_tokens
        self.decode = decode
        self.stats = BatcherStats()
        self._waiting: deque[_Row] = deque()
        self._rows: list[_Row] = []
        self._joining: list[_Row] = []  # taken from the queue, being prefilled
        self._batch: Batch | None = None
        self._logits: np.ndarray | None = None  # per running row: the logits its next token is chosen from
        self._lock = threading.Condition()
        self._stopped = False

    # --- the caller's side -------------------------------------------------------------------------------
    def submit(self, request: Request) -> None:
        if not request.prompt_ids:
            raise UserError("a prompt needs at least one token")
        if request.max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be at least 1, not {request.max_new_tokens}")
        if (request.stop or request.on_text) and self.decode is None:
            raise UserError("stop strings and streamed text need a tokenizer")
        vocab = self.model.info.vocab
        bad = [t for t in request.prompt_ids if not 0 <= t < vocab]
        if bad:
            raise UserError(f"token id {bad[0]} is outside the model's vocabulary (0 to {vocab - 1})")
        with self._lock:
            if len(self._waiting) >= self.max_queue:
                raise BatcherFull(f"{len(self._waiting)} requests are waiting (the queue holds {self.max_queue})")
            rng = np.random.default_rng(request.sampling.seed)
            self._waiting.append(_Row(request, Generation(list(request.prompt_ids)), rng))
            self._lock.notify()

    def pending(self) -> int:
        """Sequences waiting or running."""
        with self._lock:
            return len(self._waiting) + len(self._rows)

    def run_forever(self) -> None:
        """Steps while there is work, sleeps while there is none, until stop(). A step that fails (the runtime's
        error) ends every sequence in flight with finish_reason "error" and the error's text; the loop goes on."""
        while True:
            with self._lock:
                while not self._stopped and not self._waiting and not self._rows:
                    self._lock.wait()
                if self._stopped:
                    return
            try:
                self.step()
            except Exception as e:  # noqa: BLE001 - a failed step must not leave its requests waiting forever
                self.fail_all(f"{type(e).__name__}: {e}")

    def fail_all(self, error: str) -> None:
        """Ends every running sequence (and those admitted with it) with finish_reason "error"."""
        rows, self._rows = self._rows + self._joining, []
        self._joining = []
        self._batch, self._logits = None, None
        for row in rows:
            row.generation.finish_reason, row.generation.error = "error", error
            self._finish(row)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()

    # --- one step ----------------------------------------------------------------------------------------
    def step(self) -> None:
        self._admit()
        if not self._rows:
            return
        tokens = np.zeros(len(self._rows), np.int64)
        going = []
        for i, row in enumerate(self._rows):
            if row.request.cancelled:
                row.generation.finish_reason = "cancelled"
                self._finish(row)
                continue
            token = int(next_tokens(self._logits[i : i + 1], row.request.sampling, row.rng)[0])
            tokens[i] = token
            self.stats.tokens += 1
            if self._take(row, token):
                going.append(i)
            else:
                self._finish(row)
        if len(going) < len(self._rows):
            self._keep(going)
        if not self._rows:
            self._batch, self._logits = None, None
            return
        self.stats.peak_rows = max(self.stats.peak_rows, len(self._rows))
        self._logits = self.model.step(self._batch, tokens[going])
        self.stats.steps += 1

    def _admit(self) -> None:
        with self._lock:
            room = self.max_batch - len(self._rows)
            joining = []
            length = self._batch.length if self._batch else 0
            while self._waiting and room > 0:
                row = self._waiting[0]
                if row.request.cancelled:  # never prefilled
                    self._waiting.popleft()
                    row.generation.finish_reason = "cancelled"
                    self._finish(row)
                    continue
                longest = max(length, len(row.generation.prompt_ids)) + row.request.max_new_tokens
                if (len(self._rows) + len(joining) + 1) * longest > self.max_cache_tokens and (self._rows or joining):
                    break  # the cache would outgrow its bound: wait for rows to finish
                joining.append(self._waiting.popleft())
                length = max(length, len(row.generation.prompt_ids))
                room -= 1
        if not joining:
            return
        self._joining = joining  # until they are in the batch: fail_all must end them too
        batch, logits = self.model.start([r.generation.prompt_ids for r in joining])
        self._joining = []
        self.stats.prefills += 1
        if self._batch is None:
            self._batch, self._logits, self._rows = batch, logits, joining
            return
        self._batch = self._batch.stacked(batch)
        self._logits = np.concatenate([self._logits, logits], axis=0)
        self._rows += joining

    def _take(self, row: _Row, token: int) -> bool:
        """Adds token to row (streaming its new text); whether the row goes on."""
        g, req = row.generation, row.request
        eos_ids = set(self.model.info.eos_token_ids) if req.eos else set()
        decode = self.decode if (req.stop or req.on_text) else None
        going = take_token(g, token, eos_ids, req.max_new_tokens, decode, req.stop)
        if req.on_token:
            req.on_token(token)
        if going and self.model.info.max_positions and \
                len(g.prompt_ids) + len(g.token_ids) >= self.model.info.max_positions:
            g.finish_reason, going = "length", False
        if req.on_text:
            row.sent = stream_text(g.text, row.sent, going, req.stop, req.on_text)
        return going

    def _finish(self, row: _Row) -> None:
        g = row.generation
        if self.decode is not None and not g.text and g.token_ids:
            g.text = self.decode(g.token_ids)
        self.stats.finished += 1
        if row.request.on_done:
            row.request.on_done(g)

    def _keep(self, rows: list[int]) -> None:
        """Only the running rows `rows` stay; cache columns none of them uses are cut."""
        self._rows = [self._rows[i] for i in rows]
        if not rows:
            return
        first = int(np.argmax(self._batch.mask[rows].any(axis=0)))  # leading columns every remaining row pads
        self._batch.keep(rows, first)
