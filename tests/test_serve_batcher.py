"""optim.serve.batcher.Batcher on a stand-in model (a function that records its batches): gathers up to
max_batch rows, waits at most max_delay for company, keeps shapes apart, refuses with QueueFull when the queue
is full, times requests out (and drops them unrun), and on close runs what it holds before stopping."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from optim.serve.batcher import Batcher, QueueFull, RequestTimeout, ShuttingDown

LONG_DELAY_MS = 10_000.0  # a delay no test waits out: batches here end by filling up or by close()


class Model:
    """Doubles x; records each batch's shape and thread; can be held (blocked) until released."""

    def __init__(self):
        self.shapes: list[tuple] = []
        self.threads: set[str] = set()
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()

    def __call__(self, inputs):
        self.started.set()
        self.threads.add(threading.current_thread().name)
        self.release.wait()
        self.shapes.append(inputs["x"].shape)
        if np.isnan(inputs["x"]).any():
            raise ValueError("NaN in the batch")
        return {"y": inputs["x"] * 2}


class Observer:
    def __init__(self):
        self.batches = []

    def batch(self, rows, queue_seconds, compute_seconds):
        self.batches.append((rows, len(queue_seconds)))


def x(rows: int, value: float = 1.0, width: int = 3) -> dict:
    return {"x": np.full((rows, width), value, np.float32)}


async def wait_until(predicate):
    while not predicate():
        await asyncio.sleep(0.001)


def test_gathers_up_to_max_batch_rows_and_answers_each_request_its_rows():
    model, observer = Model(), Observer()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=4, max_delay_ms=LONG_DELAY_MS, observer=observer)
        requests = [x(1, i) for i in range(6)] + [x(2, 6)]
        results = await asyncio.gather(*(batcher.submit(r) for r in requests))
        await batcher.close()
        return requests, results

    requests, results = asyncio.run(main())
    for request, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], request["x"] * 2)
    assert model.shapes == [(4, 3), (4, 3)]  # 4 single rows, then 2 single rows + one request of 2
    assert observer.batches == [(4, 4), (4, 3)]
    assert model.threads and threading.main_thread().name not in model.threads  # never on the event loop


def test_a_lone_request_runs_once_max_delay_has_passed_and_late_company_joins():
    model = Model()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=8, max_delay_ms=100)
        start = time.perf_counter()
        await batcher.submit(x(1))
        waited = time.perf_counter() - start
        first = asyncio.create_task(batcher.submit(x(1)))
        await asyncio.sleep(0.01)  # well inside the 100 ms the first one waits
        second = await batcher.submit(x(2))
        await first
        await batcher.close()
        return waited, second

    waited, second = asyncio.run(main())
    assert waited >= 0.1  # it waited for company up to max_delay, no less
    assert model.shapes == [(1, 3), (3, 3)]
    np.testing.assert_array_equal(second["y"], x(2)["x"] * 2)


def test_requests_of_other_shapes_are_not_concatenated():
    model = Model()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=8, max_delay_ms=20)
        results = await asyncio.gather(batcher.submit(x(1, 1.0)), batcher.submit(x(1, 2.0, width=5)),
                                       batcher.submit(x(2, 3.0)))
        await batcher.close()
        return results

    results = asyncio.run(main())
    assert sorted(model.shapes) == [(1, 5), (3, 3)]
    assert results[1]["y"].shape == (1, 5) and results[2]["y"].shape == (2, 3)


def test_no_batch_axis_or_max_batch_1_runs_requests_one_at_a_time():
    for options in ({"batch_axis": False, "max_batch": 8}, {"batch_axis": True, "max_batch": 1}):
        model = Model()

        async def main():
            batcher = Batcher(model, max_delay_ms=LONG_DELAY_MS, **options)
            await asyncio.gather(*(batcher.submit(x(1)) for _ in range(3)))
            await batcher.close()

        asyncio.run(main())
        assert model.shapes == [(1, 3)] * 3, options


def test_a_full_queue_refuses_with_queue_full_and_the_rest_are_answered():
    model = Model()
    model.release.clear()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=1, max_queue=2)
        running = asyncio.create_task(batcher.submit(x(1)))
        await wait_until(model.started.is_set)  # the first is running, so the queue is empty
        queued = [asyncio.create_task(batcher.submit(x(1))) for _ in range(2)]
        await wait_until(lambda: batcher.depth == 2)
        with pytest.raises(QueueFull, match=r"2 requests waiting \(--max-queue 2\): retry later"):
            await batcher.submit(x(1))
        model.release.set()
        results = await asyncio.gather(running, *queued)
        await batcher.close()
        return results

    assert len(asyncio.run(main())) == 3
    assert model.shapes == [(1, 3)] * 3


def test_a_request_times_out_and_one_still_queued_is_dropped_unrun():
    model = Model()
    model.release.clear()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=1, timeout_s=0.05)
        outcomes = await asyncio.gather(batcher.submit(x(1)), batcher.submit(x(1)), return_exceptions=True)
        model.release.set()
        await batcher.close()
        return outcomes

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RequestTimeout) for o in outcomes), outcomes
    assert RequestTimeout.status == 504
    assert model.shapes == [(1, 3)]  # the running one finished; the queued one never ran


def test_a_failing_batch_fails_its_requests_only():
    model = Model()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=1)
        outcomes = await asyncio.gather(batcher.submit(x(1, np.nan)), batcher.submit(x(1)), return_exceptions=True)
        await batcher.close()
        return outcomes

    bad, good = asyncio.run(main())
    assert isinstance(bad, ValueError) and "NaN" in str(bad)
    np.testing.assert_array_equal(good["y"], x(1)["x"] * 2)


def test_close_runs_the_queued_requests_then_refuses_new_ones():
    model = Model()

    async def main():
        batcher = Batcher(model, batch_axis=True, max_batch=8, max_delay_ms=LONG_DELAY_MS)
        pending = [asyncio.create_task(batcher.submit(x(1, i))) for i in range(3)]
        await wait_until(lambda: batcher.depth == 3)  # gathering: they would wait LONG_DELAY_MS for more
        await batcher.close()
        assert model.shapes == [(3, 3)]  # run by close() itself, not after the delay
        with pytest.raises(ShuttingDown):
            await batcher.submit(x(1))
        return await asyncio.gather(*pending)

    results = asyncio.run(main())
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result["y"], x(1, i)["x"] * 2)
