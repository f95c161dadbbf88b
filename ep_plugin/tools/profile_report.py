"""The text report of `optim profile` (and `optim bench --profile`)."""

from __future__ import annotations

from typing import Callable

from ..timing import NOISY_CV
from .profile import Profile


def _shapes(shapes: list[list[int]]) -> str:
    return ", ".join("x".join(map(str, s)) if s else "scalar" for s in shapes) or "-"


def print_profile(p: Profile, echo: Callable[[str], None], top: int = 0) -> None:
    """The rows (the `top` largest; 0: all), then the time per op type. Shares are of the rows' sum."""
    echo(f"profile of {p.model}: inputs " + ", ".join(f"{k} {v}" for k, v in p.inputs.items()))
    echo(f"{p.runs} run(s) after {p.warmup} warm-up, threads: {p.threads or 'default'}, kernels: {p.isa}; "
         f"a run took {p.run_mean_ms:.3f} ms (mean, profilers on), the rows add up to {p.total_ms:.3f} ms")
    for note in p.notes:
        echo(f"note: {note}")
    if p.noisy:
        echo(f"WARNING: the runs vary by {p.run_cv:.0%} (cv > {NOISY_CV:.0%}): this machine is too noisy for the "
             "means of short steps to mean much; close other work or use more --runs")
    shown = p.rows if top <= 0 else p.rows[:top]
    digits = 3 if p.total_ms >= 1 else 4  # sub-millisecond models: tenths of a microsecond
    # The kernel column only where some step named the kernel it chose (the integer GEMMs and convolutions).
    kernels = any(r.kernel for r in shown)
    table = [[f"{r.mean_ms:.{digits}f}", f"{r.share:.1%}", r.where, r.op, _shapes(r.input_shapes),
              *([r.kernel or "-"] if kernels else []), r.nodes] for r in shown]
    headers = ["ms/run", "share", "where", "op", "input shapes", *(["kernel"] if kernels else []), "node(s)"]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(headers)]
    echo("  " + "  ".join(h.rjust(w) if i < 2 else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths))).rstrip())
    for row in table:
        echo("  " + "  ".join(c.rjust(w) if i < 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    if len(shown) < len(p.rows):
        rest = p.rows[len(shown):]
        echo(f"  ... {len(rest)} more row(s), {sum(r.share for r in rest):.1%} of the time (--top 0 shows all)")
    echo("by op type:")
    where_order = list(dict.fromkeys(s["where"] for s in p.by_op()))
    for where in where_order:
        ops = [s for s in p.by_op() if s["where"] == where]
        echo(f"  {where}: " + ", ".join(f"{s['op']} {s['share']:.1%}" for s in ops))
