"""Timing sessions so that the numbers can be trusted: warm-up first, runs alternating between the sessions
(A B A B) so that drift hits all of them equally, no thread spinning between runs, and statistics with a
noise verdict. `optim bench`, the quantizer's latency comparison and the benchmarks all time through here."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

# Coefficient of variation of the latencies above which a report warns that the machine is too noisy
# for the numbers (and the ratios between runtimes) to mean much.
NOISY_CV = 0.10
# Session config for timed sessions: idle pool threads that spin would steal the next run's cores.
NO_SPIN = {"session.intra_op.allow_spinning": "0"}
_timer = time.perf_counter  # replaced in tests to simulate a noisy machine


def now() -> float:
    """The clock timed runs are measured with, in seconds."""
    return _timer()


class DropSession(RuntimeError):
    """Raised by a timed session's run() to leave the timing: time_alternating drops that session and
    goes on with the others (a peer runtime that failed, say)."""


@dataclass
class LatencyStats:
    runs: int
    min_ms: float
    mean_ms: float
    median_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    cv: float  # standard deviation / mean
    throughput: float  # inferences per second (batch counted), from the median

    @property
    def noisy(self) -> bool:
        return self.cv > NOISY_CV


def percentile(sorted_ms: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in [0, 100])."""
    if not sorted_ms:
        raise ValueError("no timings")
    pos = (len(sorted_ms) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


def summarize(seconds: list[float], batch: int = 1) -> LatencyStats:
    """Statistics of per-run times in seconds; `batch` inferences per run count in the throughput."""
    ms = sorted(s * 1e3 for s in seconds)
    mean = statistics.fmean(ms)
    median = statistics.median(ms)
    return LatencyStats(
        runs=len(ms), min_ms=ms[0], mean_ms=mean, median_ms=median, p90_ms=percentile(ms, 90),
        p95_ms=percentile(ms, 95), p99_ms=percentile(ms, 99), max_ms=ms[-1],
        cv=statistics.pstdev(ms) / mean if mean > 0 else 0.0,
        throughput=batch * 1e3 / median if median > 0 else float("inf"),
    )


def time_alternating(sessions: dict, feeds, warmup: int, runs: int, duration: float | None,
                     warmup_duration: float | None = None) -> dict[str, list[float]]:
    """Seconds per run for each session (anything with an InferenceSession-like run()), runs alternating
    (A B A B) after each session's warm-up: `warmup` runs, then `warmup_duration` seconds of runs if given.
    `runs` rounds, or rounds for `duration` seconds (at least two) when it is given. A session whose run
    raises DropSession is dropped: the result has no entry for it. A session that times its runs itself (a runtime
    in another process: `last_seconds` after each run) is counted by that, not by the round trip to it."""
    live = dict(sessions)
    for k, s in sessions.items():
        try:
            for _ in range(warmup):
                s.run(None, feeds)
            if warmup_duration:
                end = time.perf_counter() + warmup_duration
                while time.perf_counter() < end:
                    s.run(None, feeds)
        except DropSession:
            del live[k]
    times: dict[str, list[float]] = {k: [] for k in live}
    deadline = None if duration is None else now() + duration
    n = 0
    while (deadline is None and n < runs) or (deadline is not None and (now() < deadline or n < 2)):
        for k, s in list(live.items()):
            t0 = now()
            try:
                s.run(None, feeds)
            except DropSession:
                del live[k], times[k]
                continue
            elapsed = now() - t0
            times[k].append(getattr(s, "last_seconds", None) or elapsed)
        n += 1
    return times
