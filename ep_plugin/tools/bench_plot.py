"""`optim bench --plot`: the latency distribution per runtime and, for a batch sweep, median latency
and throughput per batch size. Needs matplotlib (the `plot` extra); imported only when plotting."""

from __future__ import annotations

from .bench_peers import PEERS
from .benchmark import BenchReport

_LABELS = {"optim": "OptimEP", **PEERS, "cpu": "ORT CPU EP", "cpu-noopt": "ORT CPU EP (no graph opt.)"}


def plot_report(report: BenchReport, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError("--plot needs matplotlib: pip install 'optim[plot]'") from e
    sweep = len(report.results) > 1
    fig, axes = plt.subplots(1, 2 if sweep else 1, figsize=(12 if sweep else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    last = report.results[-1]
    for runtime, values in last.latencies_ms.items():
        ax.hist(values, bins=40, alpha=0.55, label=f"{_LABELS.get(runtime, runtime)} (median {sorted(values)[len(values) // 2]:.3f} ms)")
    shape = ", ".join(f"{k} {v}" for k, v in last.shapes.items())
    ax.set_title(f"Latency distribution ({shape})")
    ax.set_xlabel("latency per run (ms)")
    ax.set_ylabel("runs")
    ax.legend()
    if sweep:
        ax2 = axes[0][1]
        batches = [r.batch for r in report.results]
        for runtime in last.latencies_ms:
            medians = [(r.optim if runtime == "optim" else r.others[runtime]).median_ms for r in report.results]
            ax2.plot(batches, medians, marker="o", label=_LABELS.get(runtime, runtime))
        ax2.set_xscale("log", base=2)
        ax2.set_xticks(batches, [str(b) for b in batches])
        ax2.set_title("Median latency by batch size")
        ax2.set_xlabel("batch size")
        ax2.set_ylabel("median latency (ms)")
        ax2.legend()
    fig.suptitle(f"optim bench: {report.model}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
