"""The generation loop: prefill, then one token per row per step until each row has max_new_tokens, meets an
end-of-sequence id or a stop string; new text streamed as it is decided; a timing summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from optim.common.errors import UserError

from .model import CausalLM
from .sampling import Sampling, next_tokens


@dataclass
class Generation:
    """One prompt's result: its token ids, the generated ids and text, and why it stopped ("length", "eos",
    "stop": a stop string, cut from the text; in a ContinuousBatcher also "error", its step failed, and "cancelled",
    its request was)."""

    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    error: str = ""  # finish_reason "error": what failed (a server answers 500 with it)


@dataclass
class GenerationStats:
    """Timings of one generate() call, in seconds: time to first token (prefill and the first choice), the prefill
    alone, the decode steps after it; token counts over the batch."""

    batch: int
    prompt_tokens: int
    generated_tokens: int
    time_to_first_token_s: float
    prefill_s: float
    decode_s: float
    decode_steps: int

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens the decode steps made (every row of a step, while rows ran) per second of decode."""
        return (self.generated_tokens - self.batch) / self.decode_s if self.decode_s > 0 else float("nan")

    def summary(self) -> str:
        return (f"batch {self.batch}: {self.prompt_tokens} prompt tokens, {self.generated_tokens} generated; time to "
                f"first token {self.time_to_first_token_s * 1e3:.1f} ms; prefill {self.prefill_tokens_per_s:.1f} "
                f"tokens/s; decode {self.decode_tokens_per_s:.1f} tokens/s ({self.decode_steps} steps)")


def generate(model: CausalLM, prompts: list[list[int]], *, max_new_tokens: int, sampling: Sampling = Sampling(),
             decode: Callable[[list[int]], str] | None = None, stop: list[str] | None = None,
             eos: bool = True, on_text: Callable[[int, str], None] | None = None
             ) -> tuple[list[Generation], GenerationStats]:
    """Generates up to max_new_tokens after each prompt (token ids; rows are left-padded together).

    decode(ids) -> text is needed for stop strings and streaming; on_text(row, new_text) gets each row's text as
    it grows (held back while it could still become a stop string). eos=False ignores the model's end ids (for
    benchmarks that want exactly max_new_tokens)."""
    if max_new_tokens < 1:
        raise UserError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
    stop = [s for s in (stop or []) if s]
    if (stop or on_text) and decode is None:
        raise UserError("stop strings and streamed text need a tokenizer to decode the tokens")
    eos_ids = set(model.info.eos_token_ids) if eos else set()
    rows = [Generation(list(p)) for p in prompts]
    streamed = [0] * len(rows)  # characters of each row's text passed to on_text
    rng = np.random.default_rng(sampling.seed)

    start = time.perf_counter()
    batch, logits = model.start(prompts)
    prefill_s = time.perf_counter() - start
    tokens = next_tokens(logits, sampling, rng)
    first_token_s = time.perf_counter() - start
    running = [True] * len(rows)
    steps = 0
    decode_start = time.perf_counter()
    while True:
        for r, row in enumerate(rows):
            if running[r]:
                running[r] = take_token(row, int(tokens[r]), eos_ids, max_new_tokens, decode, stop)
                if on_text:
                    streamed[r] = stream_text(row.text, streamed[r], running[r], stop, lambda t, r=r: on_text(r, t))
        if not any(running):
            break
        logits = model.step(batch, tokens)
        steps += 1
        tokens = next_tokens(logits, sampling, rng)
    decode_s = time.perf_counter() - decode_start
    stats = GenerationStats(len(rows), sum(len(p) for p in prompts), sum(len(r.token_ids) for r in rows),
                            first_token_s, prefill_s, decode_s, steps)
    return rows, stats


def take_token(row: Generation, token: int, eos_ids: set[int], limit: int, decode, stop: list[str]) -> bool:
    """Adds token to row (its text decoded again when decode is given, cut at a stop string); whether the row goes
    on."""
    if token in eos_ids:
        row.finish_reason = "eos"
        return False
    row.token_ids.append(token)
    if decode is not None:
        row.text = decode(row.token_ids)
        for s in stop:
            at = row.text.find(s)
            if at >= 0:
                row.text = row.text[:at]
                row.finish_reason = "stop"
                return False
    return len(row.token_ids) < limit


def stream_text(text: str, sent: int, running: bool, stop: list[str], emit: Callable[[str], None]) -> int:
    """Passes text[sent:] to emit and returns how much of text is sent; while the row runs, holds back an unfinished
    character (decoding a partial UTF-8 sequence gives U+FFFD) and a tail that could be the start of a stop string."""
    end = len(text)
    if running:
        if text.endswith("\ufffd"):
            end -= 1
        for s in stop:
            for k in range(min(len(s) - 1, end), 0, -1):
                if text[:end].endswith(s[:k]):
                    end -= k
                    break
    if end > sent:
        emit(text[sent:end])
        return end
    return sent
