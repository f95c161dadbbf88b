"""The text report of `optim bench`."""

from __future__ import annotations

from typing import Callable

from ..timing import NOISY_CV, LatencyStats
from .bench_peers import PEERS
from .benchmark import BenchReport

_NAMES = {"optim": "OptimEP", **PEERS}


def _row(name: str, s: LatencyStats) -> str:
    return (f"  {name:<16}{s.min_ms:9.3f}{s.mean_ms:9.3f}{s.median_ms:9.3f}{s.p90_ms:9.3f}{s.p95_ms:9.3f}"
            f"{s.p99_ms:9.3f}{s.max_ms:9.3f}{s.throughput:12.1f}{s.cv:7.1%}")


def _ratio_line(other: str, ratio: float) -> str:
    verdict = f"OptimEP is {ratio:.2f}x faster" if ratio >= 1 else f"OptimEP is {1 / ratio:.2f}x slower"
    return f"  ratio {_NAMES[other]} / OptimEP median = {ratio:.2f} ({verdict})"


def print_report(r: BenchReport, echo: Callable[[str], None]) -> None:
    p = r.placement
    echo(f"model: {r.model}")
    echo(f"placement: {p['optim_nodes']}/{p['total_nodes']} nodes on OptimEP, {p['cpu_nodes']} on CPU fallback"
         + (f", {p['integer_units']} QDQ unit(s) as integer kernels" if p.get("integer_units") else ""))
    for f in p["fallback"]:
        echo(f"  {f['op']} '{f['node']}' -> {f['ep']}: {f['reason']}")
    echo("session creation: " + ", ".join(f"{_NAMES[k]} {v:.1f} ms" for k, v in r.session_create_ms.items()))
    for k, what in r.peers.items():
        echo(f"{_NAMES[k]}: {what}")
    echo(f"threads: {r.options['threads']}   kernels: {p['isa']}   peak resident memory: {r.peak_rss_mb:.0f} MB")
    for note in r.notes:
        echo(f"note: {note}")
    for res in r.results:
        shapes = ", ".join(f"{k} {v}" for k, v in res.shapes.items())
        echo("")
        echo(f"{'batch ' + str(res.batch) if res.batch else 'inputs'} ({shapes}), {res.optim.runs} runs each:")
        echo(f"  {'runtime':<16}{'min':>9}{'mean':>9}{'median':>9}{'p90':>9}{'p95':>9}{'p99':>9}{'max':>9}"
             f"{'inf/s':>12}{'cv':>7}   (latency in ms)")
        echo(_row("OptimEP", res.optim))
        for k, s in res.others.items():
            echo(_row(_NAMES[k], s))
        for k, ratio in res.ratio().items():
            echo(_ratio_line(k, ratio))
        if res.optim.noisy:
            echo(f"  WARNING: OptimEP's latencies vary by {res.optim.cv:.0%} (cv > {NOISY_CV:.0%}): this machine is too "
                 f"noisy to trust these numbers; close other work or use more --runs")
    if len(r.results) > 1:
        echo("")
        others = list(dict.fromkeys(k for res in r.results for k in res.others))  # a failed peer leaves gaps: "-"
        headers = ["batch", "OptimEP median ms", "OptimEP inf/s"] + [f"{_NAMES[k]} median ms" for k in others] + \
                  [f"ratio {_NAMES[k]}" for k in others]
        rows = [[str(res.batch), f"{res.optim.median_ms:.3f}", f"{res.optim.throughput:.1f}"]
                + [f"{res.others[k].median_ms:.3f}" if k in res.others else "-" for k in others]
                + [f"{res.ratio()[k]:.2f}" if k in res.others else "-" for k in others]
                for res in r.results]
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
        echo("sweep:")
        echo("  " + "  ".join(h.rjust(w) for h, w in zip(headers, widths)))
        for row in rows:
            echo("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)))
    if r.concurrency:
        c = r.concurrency
        echo("")
        echo(f"concurrency: {c.threads} threads on one session, {c.requests} requests in {c.wall_s:.3f} s: "
             f"{c.throughput:.1f} inferences/s; per request median {c.latency.median_ms:.3f} ms, "
             f"p90 {c.latency.p90_ms:.3f}, p99 {c.latency.p99_ms:.3f}, max {c.latency.max_ms:.3f}")
