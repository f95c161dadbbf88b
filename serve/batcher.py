"""Dynamic batching for one model on asyncio: requests wait in a bounded queue, are gathered into batches and run
in a worker thread, never on the event loop.

A batch starts with the oldest waiting request and takes the requests that can share it (batching.group_key: same
dims but dim 0) until it holds `max_batch` rows or the oldest has waited `max_delay_ms`; requests of other shapes
stay queued for the next batch. One batch runs at a time per model: while it runs, the next one gathers, so under
load batches fill without waiting. `max_batch=1`, or a model without a batch axis, runs requests one at a time.
Errors a caller sees: QueueFull (the queue holds `max_queue` requests), RequestTimeout (no answer within
`timeout_s`; a request still queued then is dropped unrun), ShuttingDown (after close() began).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Protocol

from .batching import Tensors, group_key, rows, run_groups


class BatcherError(RuntimeError):
    """A request the batcher did not answer; `status` is the HTTP status it becomes."""

    status = 503


class QueueFull(BatcherError):
    """The model's queue is full: the client should retry later (503)."""


class ShuttingDown(BatcherError):
    """The server is shutting down and takes no new requests (503)."""


class RequestTimeout(BatcherError):
    """The request was not answered in time (504)."""

    status = 504


class BatchObserver(Protocol):
    """What the batcher reports (metrics.py implements it)."""

    def batch(self, rows: int, queue_seconds: list[float], compute_seconds: float) -> None: ...


@dataclass
class _Waiting:
    inputs: Tensors
    key: tuple
    rows: int
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    """Batches and runs `run(inputs) -> outputs` (blocking, thread-safe) for one model. Create and use it on one
    event loop; `submit` starts it on first use, `close` finishes what is queued and stops it."""

    def __init__(self, run: Callable[[Tensors], Tensors], *, batch_axis: bool, max_batch: int = 8,
                 max_delay_ms: float = 5.0, max_queue: int = 256, timeout_s: float | None = 30.0,
                 observer: BatchObserver | None = None, name: str = "model"):
        if max_batch < 1 or max_queue < 1 or max_delay_ms < 0:
            raise ValueError("max_batch and max_queue must be >= 1 and max_delay_ms >= 0")
        self._run, self.name = run, name
        self.batching = batch_axis and max_batch > 1
        self.max_batch, self.max_delay, self.max_queue = max_batch, max_delay_ms / 1e3, max_queue
        self.timeout = timeout_s
        self._observer = observer
        self._waiting: collections.deque[_Waiting] = collections.deque()
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False

    @property
    def depth(self) -> int:
        """Requests waiting (not counting the batch running)."""
        return sum(not w.future.done() for w in self._waiting)

    def _start(self) -> None:
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"optim-serve-{self.name}")
        self._task = asyncio.get_running_loop().create_task(self._dispatch(), name=f"batcher {self.name}")

    async def submit(self, inputs: Tensors) -> Tensors:
        """The outputs for `inputs` (already checked against the model); raises QueueFull, ShuttingDown,
        RequestTimeout, or the model's own error."""
        if self._closing:
            raise ShuttingDown(f"the server is shutting down: model {self.name!r} takes no new requests")
        if self._task is None:
            self._start()
        self._drop_finished()
        if len(self._waiting) >= self.max_queue:
            raise QueueFull(f"model {self.name!r} has {len(self._waiting)} requests waiting (--max-queue "
                            f"{self.max_queue}): retry later")
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(inputs, group_key(inputs), rows(inputs), future))
        self._arrived.set()
        try:
            # wait_for cancels the future on timeout: the dispatcher then skips it if it has not run yet.
            return await asyncio.wait_for(future, self.timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"model {self.name!r} did not answer within {self.timeout:g} s") from None

    async def close(self) -> None:
        """Takes no new requests, runs every queued one (without waiting out max_delay), then stops."""
        self._closing = True
        if self._task is None:
            return
        self._arrived.set()
        await self._task
        self._executor.shutdown(wait=True)

    def _drop_finished(self) -> None:
        # Requests that timed out or whose client went away are dropped from the queue unrun.
        if any(w.future.done() for w in self._waiting):
            self._waiting = collections.deque(w for w in self._waiting if not w.future.done())

    async def _dispatch(self) -> None:
        while True:
            self._drop_finished()
            if not self._waiting:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            await self._gather(self._waiting[0])
            batch = self._take()
            if batch:
                await self._run_batch(batch)

    async def _gather(self, first: _Waiting) -> None:
        """Waits until first's group holds max_batch rows or first has waited max_delay (or closing)."""
        if not self.batching:
            return
        deadline = first.enqueued + self.max_delay
        while not self._closing and not first.future.done():
            if sum(w.rows for w in self._waiting if w.key == first.key and not w.future.done()) >= self.max_batch:
                return
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _take(self) -> list[_Waiting]:
        """The oldest live request and those of its group behind it, up to max_batch rows, out of the queue."""
        self._drop_finished()  # the request gathered for may have timed out meanwhile: the oldest live one leads
        if not self._waiting:
            return []
        key = self._waiting[0].key
        batch, total, kept = [], 0, collections.deque()
        for w in self._waiting:
            if not batch or (self.batching and w.key == key and total + w.rows <= self.max_batch):
                batch.append(w)
                total += w.rows
            else:
                kept.append(w)
        self._waiting = kept
        return batch

    async def _run_batch(self, batch: list[_Waiting]) -> None:
        started = time.perf_counter()
        work = functools.partial(run_groups, self._run, [w.inputs for w in batch], self.batching)
        try:
            results = await asyncio.get_running_loop().run_in_executor(self._executor, work)
        except Exception as e:  # noqa: BLE001 - run_groups returns errors; anything else fails the batch alone
            results = [e] * len(batch)
        if self._observer is not None:
            self._observer.batch(sum(w.rows for w in batch), [started - w.enqueued for w in batch],
                                 time.perf_counter() - started)
        for w, result in zip(batch, results):
            if w.future.done():  # timed out or cancelled while it ran: nobody is waiting
                continue
            if isinstance(result, Exception):
                w.future.set_exception(result)
            else:
                w.future.set_result(result)
