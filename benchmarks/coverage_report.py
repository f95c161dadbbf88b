"""COVERAGE.md from coverage.py's per-model results: the share of nodes on OptimEP, the error against the CPU
EP, and every node left to the CPU EP with OptimEP's reason (identical op and reason merged, with a count)."""

from __future__ import annotations

from realsize_models import BY_NAME

PRECISIONS = ("fp32", "int8")


def _share(info: dict | None) -> str:
    if not info:
        return "-"
    total, optim = info["total_nodes"], info["optim_nodes"]
    return f"{optim}/{total} ({100.0 * optim / total:.1f}%)" if total else "0/0"


def _err(errors: dict, key: str) -> str:
    return f"{errors[key]:.1e}" if key in errors else "-"


def _label(name: str) -> str:
    model = BY_NAME.get(name)
    return model.label if model else name


def _stages(result: dict) -> str:
    failed = [f["stage"] for f in result.get("failures", [])]
    return "ok" if not failed else "failed: " + ", ".join(dict.fromkeys(failed))


def summary_lines(results: list[dict]) -> list[str]:
    """One line per model for the console."""
    lines = []
    for r in results:
        placements = r.get("placement", {})
        shares = "  ".join(f"{p} {_share(placements.get(p))}" for p in PRECISIONS)
        lines.append(f"{r['model']:<18} {shares}  {_stages(r)}")
    return lines


def left_on_cpu(results: list[dict]) -> list[tuple[str, str, str, int, str]]:
    """(model, precisions, op, count, reason) rows: identical (op, reason) in fp32 and int8 are one row."""
    rows = []
    for r in results:
        merged: dict[tuple[str, str], dict[str, int]] = {}
        for precision in PRECISIONS:
            for n in r.get("placement", {}).get(precision, {}).get("fallback", []):
                counts = merged.setdefault((n["op"], n["reason"]), {})
                counts[precision] = counts.get(precision, 0) + 1
        for (op, reason), counts in merged.items():
            rows.append((r["model"], ", ".join(counts), op, max(counts.values()), reason))
    return rows


def markdown(results: list[dict], command: str, machine: dict, seconds: float) -> list[str]:
    lines = [
        "# OptimEP coverage",
        "",
        "Produced by `benchmarks/coverage.py` (do not edit by hand). Each model has random weights (no download) and",
        "goes through optim's pipeline: `optim.exporter.export`, `optim.optimizer.optimize`, then",
        "`optim.optimizer.quantization.quantize` (10 random calibration batches; transformers quantize their MatMuls",
        "only). Nodes are counted in the ONNX Runtime session (after its basic rewrites), If/Loop/Scan bodies included.",
        "The error columns are the relative L2 error of one batch-1 output against the fp32 model on the CPU EP.",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine['cpu']}, {machine['cores']} cores; onnxruntime {machine['onnxruntime']}, Python "
        f"{machine['python']}; {machine['date']}; {seconds:.0f} s.",
        "",
        "| model | pipeline | fp32 nodes on OptimEP | int8 nodes on OptimEP | int8 integer units | fp32 error OptimEP | "
        "int8 error OptimEP / CPU EP |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        p = r.get("placement", {})
        errors = r.get("rel_l2_vs_fp32_cpu", {})
        units = p.get("int8", {}).get("integer_units", "-")
        lines.append(f"| {_label(r['model'])} | {_stages(r)} | {_share(p.get('fp32'))} | {_share(p.get('int8'))} | "
                     f"{units} | {_err(errors, 'fp32_optim')} | {_err(errors, 'int8_optim')} / {_err(errors, 'int8_cpu')} |")
    rows = left_on_cpu(results)
    lines += ["", "## Nodes left to the CPU EP, with OptimEP's reason", ""]
    if rows:
        lines += ["| model | in | op | nodes | reason |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {m} | {prec} | {op} | {count} | {reason.replace('|', '/')} |" for m, prec, op, count, reason in rows]
    else:
        lines.append("None: every node of every model runs on OptimEP.")
    failures = [(r["model"], f) for r in results for f in r.get("failures", [])]
    if failures:
        lines += ["", "## Pipeline failures", ""]
        lines += [f"- {m}, {f['stage']}: {f['error']}" for m, f in failures]
    return lines
