"""ONNX Runtime GenAI as a peer of benchmarks/llm.py: its model builder's int4 CPU model (blocks of 32, int8
activations: accuracy_level 4) from the same Hugging Face weights as optim's export, timed in a child process, so a
missing package, a failed build or a crash is a note in the table, never the benchmark's end.

    .venv/bin/python benchmarks/genai_peer.py FOLDER --batch 1 --prompt 128 --decode 32 --runs 3 --threads 2

(the child's command line) prints one JSON object: prefill and decode tokens/s, medians over the runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GENAI_FORMAT = "int4"  # optim's precision the builder's model is compared with (its int4-a8 is the same scheme)
TIMEOUT_S = 1800


def build(name: str, cache: Path) -> Path:
    """The builder's model for zoo LLM `name` (cached): the factory's weights saved as a Hugging Face folder, then
    `python -m onnxruntime_genai.models.builder -p int4 -e cpu`. Raises RuntimeError saying why it could not."""
    out = cache / name / "genai-int4"
    if (out / "genai_config.json").exists():
        return out
    if importlib.util.find_spec("onnxruntime_genai") is None:  # found, not imported: its native code stays out
        raise RuntimeError("onnxruntime-genai is not installed")
    from optim.models import get as zoo_get

    hf = cache / name / "hf"
    if not (hf / "config.json").exists():
        zoo_get(name).factory().save_pretrained(hf)
        _save_placeholder_tokenizer(hf)
    print(f"building {name} with ONNX Runtime GenAI's model builder", file=sys.stderr)
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(out), "-p", "int4",
           "-e", "cpu", "-c", str(cache / name / "genai-cache"), "--extra_options", "accuracy_level=4", "block_size=32"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0 or not (out / "genai_config.json").exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the GenAI model builder failed (exit {done.returncode}): {tail[0]}")
    return out


def _save_placeholder_tokenizer(folder: Path) -> None:
    """The builder saves the folder's tokenizer beside its model; the benchmark feeds token ids, so any fast
    tokenizer will do: a word-level one of three special tokens (no download, no sentencepiece)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>").save_pretrained(folder)


def measure(folder: Path, batch: int, prompt: int, steps: int, runs: int, threads: int) -> dict:
    """Runs this file on `folder` in a child process: its JSON result, or {"error": why}."""
    cmd = [sys.executable, __file__, str(folder), "--batch", str(batch), "--prompt", str(prompt), "--decode", str(steps),
           "--runs", str(runs), "--threads", str(threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"ONNX Runtime GenAI did not finish in {TIMEOUT_S} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return {"error": f"ONNX Runtime GenAI failed (exit {done.returncode}): {tail[0]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _set_threads(folder: Path, threads: int) -> None:
    config_path = folder / "genai_config.json"
    config = json.loads(config_path.read_text())
    options = config["model"]["decoder"].setdefault("session_options", {})
    if options.get("intra_op_num_threads") != threads:
        options["intra_op_num_threads"] = threads
        config_path.write_text(json.dumps(config, indent=4))


def _one_run(og, model, vocab: int, batch: int, prompt: int, steps: int, seed: int) -> tuple[float, float]:
    """(prefill s, decode s): the prompt appended (the prefill), then steps + 1 greedy tokens, the first chosen from
    the prefill's logits, so the timed decode is `steps` forward passes, as optim's."""
    import numpy as np

    ids = np.random.default_rng(seed).integers(0, vocab, (batch, prompt)).astype(np.int32)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt + steps + 1, do_sample=False, batch_size=batch)
    generator = og.Generator(model, params)
    start = time.perf_counter()
    generator.append_tokens(ids)
    prefill = time.perf_counter() - start
    generator.generate_next_token()
    start = time.perf_counter()
    for _ in range(steps):
        generator.generate_next_token()
    return prefill, time.perf_counter() - start


def _child(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    import onnxruntime_genai as og

    folder = Path(args.folder)
    _set_threads(folder, args.threads)
    vocab = json.loads((folder / "genai_config.json").read_text())["model"]["vocab_size"]
    model = og.Model(str(folder))
    _one_run(og, model, vocab, args.batch, args.prompt, 2, 0)  # warm-up
    times = [_one_run(og, model, vocab, args.batch, args.prompt, args.decode, r) for r in range(args.runs)]
    pre = statistics.median(t[0] for t in times)
    dec = statistics.median(t[1] for t in times)
    print(json.dumps({"version": og.__version__, "prefill_tok_s": args.batch * args.prompt / pre,
                      "decode_tok_s": args.batch * args.decode / dec, "decode_ms_per_step": dec / args.decode * 1e3}))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
