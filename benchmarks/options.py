"""Command-line options the budgeted benchmark scripts share (realsize.py, realsize_model.py, conv.py)."""

from __future__ import annotations


def add_timing(ap, *, budget: float, budget_for: str, runs: int, warmup: int) -> None:
    """The timing options every budgeted benchmark takes (--budget, --runs, --min-runs, --warmup, --threads)."""
    ap.add_argument("--budget", type=float, default=budget, help=f"seconds of timed runs {budget_for} (default {budget:g})")
    ap.add_argument("--runs", type=int, default=runs, help=f"at most this many timed runs per side (default {runs})")
    ap.add_argument("--min-runs", type=int, default=5, help="at least this many, whatever the budget (default 5)")
    ap.add_argument("--warmup", type=int, default=warmup, help=f"warm-up runs per session (default {warmup})")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of every session, and of the peak (default 2)")


def add_kernels(ap) -> None:
    """OptimEP's kernel set and the int8 models' weight precision (realsize.py, realsize_model.py)."""
    from optim.ep_plugin import ISAS

    ap.add_argument("--isa", default="auto", choices=["auto", *ISAS],
                    help="OptimEP's kernel set (default auto: the best this CPU runs); shares are of its peaks")
    ap.add_argument("--weight-bits", type=int, default=8, choices=[8, 7],
                    help="the int8 models' weights: 8 bits, or 7 (`optim quantize --weight-bits 7`: exact u8 x s8 "
                         "kernels without VNNI); default 8")


def kernels_argv(args) -> list[str]:
    return ["--isa", args.isa, "--weight-bits", str(args.weight_bits)]


def check_timing(ap, args) -> None:
    """Exits with a usage error when the timing options cannot work together."""
    if args.min_runs < 1 or args.runs < args.min_runs or args.budget <= 0 or args.warmup < 0 or args.threads < 1:
        ap.error("need 1 <= --min-runs <= --runs, --budget > 0, --warmup >= 0 and --threads >= 1")


def timing_argv(args) -> list[str]:
    """The command-line words that give another script the same timing options."""
    return ["--budget", str(args.budget), "--runs", str(args.runs), "--min-runs", str(args.min_runs),
            "--warmup", str(args.warmup), "--threads", str(args.threads)]


def subset(ap, given: str | None, names: list[str], what: str) -> list[str]:
    """The names in the comma-separated `given` (all when None), in `names`' order; an unknown one is an error."""
    if not given:
        return list(names)
    wanted = given.split(",")
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        ap.error(f"unknown {what}(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    return [n for n in names if n in wanted]
