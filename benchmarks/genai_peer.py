"""ONNX Runtime GenAI as a peer of benchmarks/llm.py: its model builder's int4 CPU model (blocks of 32, int8
activations: accuracy_level 4) from the same Hugging Face weights as optim's export, timed in a child process, so a
missing package, a failed build or a crash is a note in the table, never the benchmark's end.

The child (Peer) loads the model once and answers one timed run per request, so that llm.py interleaves GenAI's runs
with OptimEP's and the CPU EP's: on a host whose speed drifts over minutes, runs taken in turn compare like with
like, where a block of runs after the others did not (the same configuration measured 222 and 278 tok/s).

    .venv/bin/python benchmarks/genai_peer.py FOLDER --threads 2

(the child's command line) reads JSON requests {"batch", "prompt", "steps", "seed"} from stdin, one per line, and
answers each with {"prefill_s", "decode_s"} (or {"error"}); its first line says {"version"} once the model is loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import select
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


class Peer:
    """GenAI in a child process, `folder`'s model loaded once; run() times one prefill + decode there. A child that
    fails or dies makes `error` say why; run() then returns None."""

    def __init__(self, folder: Path, threads: int):
        self.error = ""
        self.version = ""
        self._proc = subprocess.Popen([sys.executable, __file__, str(folder), "--threads", str(threads)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = self._answer()
        if first is not None:
            self.version = first.get("version", "")

    def run(self, batch: int, prompt: int, steps: int, seed: int) -> tuple[float, float] | None:
        if self.error:
            return None
        try:
            self._proc.stdin.write(json.dumps({"batch": batch, "prompt": prompt, "steps": steps, "seed": seed}) + "\n")
            self._proc.stdin.flush()
        except OSError as e:
            self._fail(f"ONNX Runtime GenAI's child is gone ({e})")
            return None
        got = self._answer()
        return None if got is None else (got["prefill_s"], got["decode_s"])

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()

    def _answer(self) -> dict | None:
        ready, _, _ = select.select([self._proc.stdout], [], [], TIMEOUT_S)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            why = "did not answer in time" if not ready else f"exited ({self._proc.poll()})"
            self._fail(f"ONNX Runtime GenAI {why}")
            return None
        got = json.loads(line)
        if "error" in got:
            self._fail(f"ONNX Runtime GenAI failed: {got['error']}")
            return None
        return got

    def _fail(self, why: str) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        tail = self._proc.stderr.read().strip().splitlines()[-1:] if self._proc.stderr else []
        self.error = why + (f": {tail[0]}" if tail else "")


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
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    import onnxruntime_genai as og

    folder = Path(args.folder)
    _set_threads(folder, args.threads)
    vocab = json.loads((folder / "genai_config.json").read_text())["model"]["vocab_size"]
    model = og.Model(str(folder))
    print(json.dumps({"version": og.__version__}), flush=True)
    warmed = set()
    for line in sys.stdin:
        try:
            r = json.loads(line)
            if (r["batch"], r["prompt"]) not in warmed:  # a first run of each shape, untimed
                _one_run(og, model, vocab, r["batch"], r["prompt"], 2, 0)
                warmed.add((r["batch"], r["prompt"]))
            prefill, decode = _one_run(og, model, vocab, r["batch"], r["prompt"], r["steps"], r["seed"])
            print(json.dumps({"prefill_s": prefill, "decode_s": decode}), flush=True)
        except Exception as e:  # noqa: BLE001 - the parent reports it
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
