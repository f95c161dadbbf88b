"""The real-size suite's figures from the per-model results: ratios, speedups, GFLOP/s, shares of
peak, geometric means, placement, and the markdown tables of BENCHMARKS.md."""

from __future__ import annotations

import math
import re
from collections import Counter

from realsize_models import BY_NAME

PRECISIONS = ("fp32", "int8")


def _median(row: dict, name: str) -> float | None:
    s = row["stats"].get(name)
    return s["median_ms"] if s else None


def figures(result: dict, peak) -> list[dict]:
    """Per batch of one model: medians, ratio CPU EP / OptimEP per precision, int8 speedup on
    OptimEP, and OptimEP's effective rate (2 x multiply-adds / median) with its share of the peak."""
    rows = []
    for b in result.get("batches", []):
        r = {"model": result["model"], "batch": b["batch"], "gflop": 2 * b["macs"] / 1e9, "runs": b["runs"],
             "rel_l2": b["rel_l2_vs_fp32_cpu"]}
        for p, best in (("fp32", peak.fp32_gflops), ("int8", peak.int8_gops)):
            optim, cpu = _median(b, f"{p}_optim"), _median(b, f"{p}_cpu")
            r[p] = {"optim_ms": optim, "cpu_ms": cpu, "ratio": cpu / optim if optim and cpu else None,
                    "rate": r["gflop"] / (optim * 1e-3) if optim else None}
            r[p]["share"] = r[p]["rate"] / best if r[p]["rate"] else None
        f32, i8 = r["fp32"]["optim_ms"], r["int8"]["optim_ms"]
        r["int8_speedup"] = f32 / i8 if f32 and i8 else None
        rows.append(r)
    return rows


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def geomeans(rows: list[dict]) -> dict[str, tuple[float | None, int]]:
    """Geometric mean of the CPU EP / OptimEP ratios per precision, with how many rows it covers."""
    out = {}
    for p in PRECISIONS:
        ratios = [r[p]["ratio"] for r in rows if r[p]["ratio"]]
        out[p] = (geomean(ratios), len(ratios))
    return out


def left_on_cpu(placement: dict | None) -> Counter:
    """Op type -> how many nodes of it OptimEP left to the CPU EP."""
    return Counter(n["op"] for n in (placement or {}).get("fallback", []))


def fallback_reasons(results: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(op, reason with node and value names blanked) -> models where OptimEP refused it for that reason."""
    out: dict[tuple[str, str], list[str]] = {}
    for res in results:
        for placement in res.get("placement", {}).values():
            for n in placement.get("fallback", []):
                key = (n["op"], re.sub(r"'[^']*'", "'…'", n["reason"] or "no reason recorded"))
                models = out.setdefault(key, [])
                if res["model"] not in models:
                    models.append(res["model"])
    return out


def _f(value, fmt: str, missing: str = "-") -> str:
    return missing if value is None else format(value, fmt)


def _share(rate, share, unit: str) -> str:
    return "-" if rate is None else f"{rate:.0f} {unit} ({share:.0%})"


def _left(placement: dict | None) -> str:
    if placement is None:
        return "-"
    return ", ".join(f"{op} {n}" for op, n in left_on_cpu(placement).most_common()) or "none"


def short_error(error: str) -> str:
    """The error on one line, without ONNX Runtime's wrapper around an EP's own message."""
    kind, _, rest = " ".join(error.split()).partition(": ")
    return f"{kind}: {rest.split('Status Message: ', 1)[-1]}"


def timing_table(rows: list[dict]) -> list[str]:
    lines = ["| model | batch | GFLOP | fp32 OptimEP (ms) | fp32 CPU EP (ms) | fp32 ratio | int8 OptimEP (ms) | "
             "int8 CPU EP (ms) | int8 ratio | int8 speedup on OptimEP | fp32 on OptimEP: GFLOP/s (% of peak) | "
             "int8 on OptimEP: GOP/s (% of int8 peak) | runs per side |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        a, b = r["fp32"], r["int8"]
        lines.append(f"| {BY_NAME[r['model']].label} | {r['batch']} | {r['gflop']:.2f} | {_f(a['optim_ms'], '.2f')} | "
                     f"{_f(a['cpu_ms'], '.2f')} | {_f(a['ratio'], '.2f')} | {_f(b['optim_ms'], '.2f')} | "
                     f"{_f(b['cpu_ms'], '.2f')} | {_f(b['ratio'], '.2f')} | {_f(r['int8_speedup'], '.2f')} | "
                     f"{_share(a['rate'], a['share'], 'GFLOP/s')} | {_share(b['rate'], b['share'], 'GOP/s')} | {r['runs']} |")
    return lines


def placement_table(results: list[dict], rows: list[dict]) -> list[str]:
    lines = ["| model | int8 recipe | fp32 on OptimEP | int8 on OptimEP | integer units | left on the CPU EP: fp32 | "
             "left on the CPU EP: int8 | rel. L2 vs fp32 CPU EP, batch 1: fp32 OptimEP / int8 OptimEP / int8 CPU EP |",
             "|---|---|---:|---:|---:|---|---|---|"]
    for res in results:
        name, pl = res["model"], res.get("placement", {})
        share = {p: f"{pl[p]['optim_nodes']}/{pl[p]['total_nodes']} ({pl[p]['optim_nodes'] / pl[p]['total_nodes']:.0%})"
                 if p in pl else "-" for p in PRECISIONS}
        recipe = "MatMul only" if BY_NAME[name].op_types else "all ops"
        first = next((r for r in rows if r["model"] == name), None)
        err = first["rel_l2"] if first else {}
        errors = " / ".join(_f(err.get(k), ".1e") for k in ("fp32_optim", "int8_optim", "int8_cpu"))
        lines.append(f"| {BY_NAME[name].label} | {recipe} | {share['fp32']} | {share['int8']} | "
                     f"{pl.get('int8', {}).get('integer_units', '-')} | {_left(pl.get('fp32'))} | {_left(pl.get('int8'))} | "
                     f"{errors} |")
    return lines


def failure_lines(results: list[dict]) -> list[str]:
    failed = [(r["model"], f) for r in results for f in r.get("failures", [])]
    if not failed:
        return ["No failures: every model exported, optimized, quantized and ran on both runtimes."]
    lines = ["| model | stage | error |", "|---|---|---|"]
    for model, f in failed:
        lines.append(f"| {BY_NAME[model].label} | {f['stage']} | {short_error(f['error']).replace('|', '/')[:400]} |")
    return lines


def reason_lines(results: list[dict]) -> list[str]:
    return [f"- {op}: {reason} ({', '.join(models)})" for (op, reason), models in sorted(fallback_reasons(results).items())]


def markdown(results: list[dict], rows: list[dict], header: list[str]) -> list[str]:
    g = geomeans(rows)
    means = "; ".join(f"{p} {_f(v, '.2f')} over {n} model-batch pairs" for p, (v, n) in g.items())
    return [*header, *timing_table(rows), "",
            f"Geometric mean of the ratios CPU EP / OptimEP: {means}.", "",
            "Placement (nodes on OptimEP / all nodes of the session's graph) and correctness:", "",
            *placement_table(results, rows), "",
            "Why OptimEP left those nodes to the CPU EP (quoted names blanked):", "", *reason_lines(results), "",
            "Failures:", "", *failure_lines(results)]
