"""Generative LM speed: prefill and decode tokens/s on OptimEP and on ONNX Runtime's CPU EP, fp32 and weight-only
int4 / int8, side by side in one process (alternating per configuration); for int4-a8, ONNX Runtime GenAI too.

    .venv/bin/python benchmarks/llm.py [--models llama_0_1b] [--batch 1,8] [--prompt 128] [--decode 32]
        [--precisions fp32,int4,int4-a8,int8] [--runs 3] [--threads 2] [--isa auto] [--requests 16] [--max-batch 8]
        [--no-genai] [--copied-cache] [--json out.json] [--no-markdown]

Each model (optim.models.LLM, random weights) is exported with its KV cache and quantized weight-only (blocks of 32,
with zero points; int4-a8: int8 activations at run time, accuracy_level 4) by optim's own library, the files
cached in benchmarks/.cache/llm/. A run: a prefill of `--prompt`
random tokens per row, then `--decode` greedy steps (end ids ignored); prefill tokens/s = batch x prompt / prefill
time, decode tokens/s = batch x steps / decode time; medians over --runs. Then continuous batching on OptimEP:
--requests requests at once through optim.llm.batcher, one at a time vs --max-batch at a time. ONNX Runtime GenAI
(genai_peer.py: its model builder's int4 model of the same weights, symmetric blocks of 32, int8 activations) runs
each int4-a8 configuration in a child process, its runs in turn with OptimEP's and the CPU EP's; a failure there is
a note under the table. Rewrites the tables between the llm markers in BENCHMARKS.md with the command and the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from optim.common.machine import core_count, cpu_summary
import genai_peer
from optim.llm import CausalLM, generate
from run import HERE, _replace_between

MARKERS = ("<!-- llm:begin -->", "<!-- llm:end -->")
DEFAULT_MODELS = "llama_0_1b"
# Weight formats: bits, and whether activations are quantized to int8 at run time (accuracy_level 4).
FORMATS = {"int4": (4, False), "int8": (8, False), "int4-a8": (4, True)}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated optim.models.LLM names")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--prompt", default="128", help="comma-separated prompt lengths")
    ap.add_argument("--decode", type=int, default=32, help="decode steps per run")
    ap.add_argument("--precisions", default="fp32,int4,int4-a8,int8",
                    help="fp32, int4, int8 (weights), int4-a8 (int4 weights, int8 activations: accuracy_level 4)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=core_count())
    ap.add_argument("--isa", default="auto", help="OptimEP's kernels (e.g. avx2 on any host); the CPU EP picks its own")
    ap.add_argument("--cache", default=str(HERE / ".cache" / "llm"))
    ap.add_argument("--requests", type=int, default=16,
                    help="continuous batching: this many requests (prompts of 32 tokens, --decode new tokens each) at "
                         "once, served one at a time and --max-batch at a time")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--no-genai", action="store_true", help="skip ONNX Runtime GenAI (int4-a8 rows)")
    ap.add_argument("--copied-cache", action="store_true",
                    help="OptimEP copies its KV cache every step, as the file is written (default: kept in place)")
    ap.add_argument("--json")
    ap.add_argument("--no-markdown", action="store_true")
    return ap.parse_args(argv)


def _isa(args) -> str | None:
    return None if args.isa == "auto" else args.isa


def prepare(name: str, precision: str, cache: Path) -> Path:
    folder = cache / name
    fp32 = folder / "model.onnx"
    if not fp32.exists():
        from optim.exporter import export

        print(f"exporting {name}", file=sys.stderr)
        export(name, fp32)
    if precision == "fp32":
        return fp32
    path = folder / f"model.{precision}.onnx"
    if not path.exists():
        from optim.optimizer.quantization.weight_only import quantize_weights

        print(f"quantizing {name} to {precision}", file=sys.stderr)
        bits, int8_activations = FORMATS[precision]
        quantize_weights(fp32, path, bits=bits, block=32, int8_activations=int8_activations)
    return path


def _genai_peer(name: str, cache: Path, args) -> genai_peer.Peer | str:
    """ONNX Runtime GenAI's model of `name` loaded in its child process, or why not."""
    try:
        folder = genai_peer.build(name, cache)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        return str(e)
    peer = genai_peer.Peer(folder, args.threads)
    return peer.error or peer


def _rates(times: list[tuple[float, float]], batch: int, prompt: int, steps: int) -> dict:
    pre = statistics.median(x[0] for x in times)
    dec = statistics.median(x[1] for x in times)
    return {"prefill_tok_s": batch * prompt / pre, "decode_tok_s": batch * steps / dec,
            "decode_ms_per_step": dec / steps * 1e3}


def step_weight_bytes(path: Path) -> int:
    """Bytes of the weights one decode step reads: every initializer but the ones Gather indexes (an embedding table
    is read one row per token)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    gathered = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
    total = 0
    for t in model.graph.initializer:
        if t.name in gathered:
            continue
        ext = {e.key: e.value for e in t.external_data}
        total += int(ext["length"]) if "length" in ext else len(t.raw_data) or onnx.numpy_helper.to_array(t).nbytes
    return total


def time_one(model: CausalLM, batch: int, prompt: int, steps: int, seed: int) -> tuple[float, float]:
    """(prefill seconds, decode seconds) of one run."""
    ids = np.random.default_rng(seed).integers(0, model.info.vocab, (batch, prompt)).tolist()
    _, stats = generate(model, ids, max_new_tokens=steps + 1, eos=False)
    return stats.prefill_s, stats.decode_s


def continuous_batching(model: CausalLM, requests: int, prompt: int, new_tokens: int, max_batch: int) -> float:
    """Generated tokens/s of `requests` requests (random prompts of `prompt` tokens, `new_tokens` each) submitted
    at once to a ContinuousBatcher of max_batch rows (1: one request at a time)."""
    from optim.llm.batcher import ContinuousBatcher, Request

    batcher = ContinuousBatcher(model, max_batch=max_batch, max_queue=requests)
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for _ in range(requests):
        batcher.submit(Request(rng.integers(0, model.info.vocab, prompt).tolist(), max_new_tokens=new_tokens, eos=False))
    while batcher.pending():
        batcher.step()
    return requests * new_tokens / (time.perf_counter() - start)


def serving_rows(args, cache: Path) -> list[dict]:
    rows = []
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            model = CausalLM(prepare(name, precision, cache), threads=args.threads, isa=_isa(args),
                             in_place_cache=False if args.copied_cache else None)
            continuous_batching(model, 2, 8, 2, 2)  # warm-up
            rates = {b: continuous_batching(model, args.requests, 32, args.decode, b) for b in (1, args.max_batch)}
            rows.append({"model": name, "precision": precision, "requests": args.requests, "one_at_a_time": rates[1],
                         "continuous": rates[args.max_batch], "max_batch": args.max_batch})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    cache = Path(args.cache)
    from bandwidth import measure as measure_bandwidth

    bandwidth = measure_bandwidth(HERE / ".cache", args.threads)
    rows = []
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            path = prepare(name, precision, cache)
            models = {"optim": CausalLM(path, threads=args.threads, isa=_isa(args),
                                        in_place_cache=False if args.copied_cache else None),
                      "cpu": CausalLM(path, runtime="cpu", threads=args.threads)}
            peer = _genai_peer(name, cache, args) if precision == "int4-a8" and not args.no_genai else None
            for batch in map(int, args.batch.split(",")):
                for prompt in map(int, args.prompt.split(",")):
                    times = {rt: [] for rt in models}
                    genai_times = []
                    for rt, m in models.items():  # warm-up
                        time_one(m, batch, prompt, 2, 0)
                    for r in range(args.runs):  # the runtimes in turn, GenAI's run after them
                        for rt, m in models.items():
                            times[rt].append(time_one(m, batch, prompt, args.decode, r))
                        if isinstance(peer, genai_peer.Peer):
                            genai_times.append(peer.run(batch, prompt, args.decode, r))
                    row = {"model": name, "precision": precision, "batch": batch, "prompt": prompt,
                           "decode_steps": args.decode, "file_mib": path.stat().st_size / 2**20,
                           "step_weight_bytes": step_weight_bytes(path)}
                    for rt, t in times.items():
                        row[rt] = _rates(t, batch, prompt, args.decode)
                    if isinstance(peer, str):
                        row["genai"] = {"error": peer}
                    elif peer is not None:
                        row["genai"] = ({"error": peer.error} if peer.error else
                                        {**_rates(genai_times, batch, prompt, args.decode), "version": peer.version})
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
            if isinstance(peer, genai_peer.Peer):
                peer.close()
    serving = serving_rows(args, cache)
    machine = (f"{cpu_summary()}, {core_count()} cores; onnxruntime {ort.__version__}; {args.threads} intra-op "
               f"threads; OptimEP's kernels: {args.isa}; memory read bandwidth (bandwidth.cc, {args.threads} threads) "
               f"{bandwidth / 1e9:.1f} GB/s")
    for row in rows:
        row["bandwidth_bound_ms"] = row["step_weight_bytes"] / bandwidth * 1e3
    command = "`.venv/bin/python benchmarks/llm.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`"
    table = render(rows, machine, command.replace(" `", "`"), args) + "\n\n" + render_serving(serving)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "bandwidth": bandwidth, "rows": rows,
                                               "serving": serving}, indent=2))
    if not args.no_markdown:  # a run with other kernels or models has markers (and a section) of its own
        tag = "-".join(([] if args.models == DEFAULT_MODELS else [args.models.replace(",", "-")]) +
                       ([] if args.isa == "auto" else [args.isa]))
        markers = tuple(m.replace("llm:", f"llm-{tag}:") for m in MARKERS) if tag else MARKERS
        heading = "Generative LMs (issue 30)" + ("" if args.models == DEFAULT_MODELS else f", {args.models}") + \
                  ("" if args.isa == "auto" else f", OptimEP's kernels forced to {args.isa}")
        doc = HERE / "BENCHMARKS.md"
        doc.write_text(_replace_between(doc.read_text(), markers, table.splitlines(), heading=heading))
    return 0


def render(rows: list[dict], machine: str, command: str, args) -> str:
    genai_run = any("genai" in r for r in rows)  # GenAI's columns where it was asked for (int4-a8 rows)
    lines = [f"Command: {command}  ", f"Machine: {machine}.  ",
             f"Each cell: median of {args.runs} runs (after a warm-up) of a prefill then {args.decode} decode steps; "
             "ratio = OptimEP / CPU EP tokens/s (above 1: OptimEP faster). OptimEP's KV cache: " +
             ("copied every step, as the file has it (--copied-cache)." if args.copied_cache else
              "kept in place (llm/cache_layout.py: one buffer per cache, past and present bound to it)."), "",
             "The bandwidth bound: the weights one decode step reads (every initializer but the embedding table) at "
             "the measured read bandwidth; share = that bound / OptimEP's time per step.", "",
             "| model | weights | file (MiB) | batch | prompt | prefill tok/s OptimEP | prefill tok/s CPU EP | ratio | "
             "decode tok/s OptimEP | decode tok/s CPU EP | ratio | decode ms/step OptimEP | bandwidth bound ms/step "
             "(share) |" + (" prefill tok/s GenAI | decode tok/s GenAI | decode OptimEP / GenAI |" if genai_run else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" * 3 if genai_run else "")]
    notes = []
    for r in rows:
        o, c = r["optim"], r["cpu"]
        genai = r.get("genai") or {}
        if "error" in genai:
            notes.append(f"- GenAI, {r['model']} batch {r['batch']} prompt {r['prompt']}: {genai['error']}")
        peer = (f" {genai['prefill_tok_s']:.0f} | {genai['decode_tok_s']:.1f} | "
                f"{o['decode_tok_s'] / genai['decode_tok_s']:.2f} |") if "decode_tok_s" in genai else " - | - | - |"
        lines.append(f"| {r['model']} | {r['precision']} | {r['file_mib']:.0f} | {r['batch']} | {r['prompt']} | "
                     f"{o['prefill_tok_s']:.0f} | {c['prefill_tok_s']:.0f} | {o['prefill_tok_s'] / c['prefill_tok_s']:.2f} | "
                     f"{o['decode_tok_s']:.1f} | {c['decode_tok_s']:.1f} | {o['decode_tok_s'] / c['decode_tok_s']:.2f} | "
                     f"{o['decode_ms_per_step']:.1f} | {r['bandwidth_bound_ms']:.1f} "
                     f"({r['bandwidth_bound_ms'] / o['decode_ms_per_step']:.0%}) |" + (peer if genai_run else ""))
    versions = {r["genai"]["version"] for r in rows if "version" in (r.get("genai") or {})}
    if versions:
        lines += ["", f"GenAI: onnxruntime-genai {', '.join(sorted(versions))}, its model builder's int4 CPU model of the "
                  "same weights (symmetric blocks of 32, int8 activations: accuracy_level 4), in a child process that "
                  "loads it once; its runs taken in turn with the other two (each run: OptimEP, CPU EP, GenAI)."]
    return "\n".join(lines + ([""] + notes if notes else []))



def render_serving(rows: list[dict]) -> str:
    lines = ["Continuous batching on OptimEP (optim.llm.batcher, what `optim serve` runs): requests submitted at once, "
             "prompts of 32 random tokens; generated tokens/s, one request at a time vs up to max-batch sequences "
             "sharing each decode step.", "",
             "| model | weights | requests | one at a time (tok/s) | continuous (tok/s) | max batch | gain |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['precision']} | {r['requests']} | {r['one_at_a_time']:.1f} | "
                     f"{r['continuous']:.1f} | {r['max_batch']} | {r['continuous'] / r['one_at_a_time']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
