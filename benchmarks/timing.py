"""Alternating timed runs within a time budget, on top of optim.ep_plugin.timing.

The run count adapts to the model: one probe round (A B C ... once each, after the warm-up) says
how long a round takes, and as many rounds as fit in the budget follow, at least `min_runs` (a
median of fewer says little) and at most `max_runs`. Big models get fewer runs, small ones more.
"""

from __future__ import annotations

from optim.ep_plugin.timing import LatencyStats, summarize, time_alternating


def budgeted_runs(round_seconds: float, budget_s: float, min_runs: int, max_runs: int) -> int:
    """Rounds that fit in `budget_s`, clamped to [min_runs, max_runs]."""
    fits = int(budget_s / round_seconds) if round_seconds > 0 else max_runs
    return max(min_runs, min(max_runs, fits))


def time_within_budget(sessions: dict, feeds: dict, *, budget_s: float, min_runs: int, max_runs: int, warmup: int,
                       batch: int = 1) -> tuple[dict[str, LatencyStats], int]:
    """Latency statistics per session from alternating runs (A B A B ...), and the run count used."""
    probe = time_alternating(sessions, feeds, warmup, 1, None)
    runs = budgeted_runs(sum(t[0] for t in probe.values()), budget_s, min_runs, max_runs)
    times = time_alternating(sessions, feeds, 0, runs, None)
    return {name: summarize(t, batch) for name, t in times.items()}, runs

