"""A causal LM exported by `optim export` (exporter/causal_lm.py) as a session with its KV cache: prefill a batch
of prompts, then one token per row per step."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from optim.common.errors import UserError

from .info import positions, read_info


@dataclass
class Batch:
    """The rows being generated: the attention mask over every position so far and the cache of each layer."""

    mask: np.ndarray  # [batch, total] int64, 0 on left padding
    cache: dict[str, np.ndarray]  # past_key_values.{i}.key / .value -> [batch, kv_heads, total, head_dim]

    @property
    def length(self) -> int:
        return self.mask.shape[1]


class CausalLM:
    """An exported causal LM on OptimEP (ONNX Runtime's CPU EP for what it leaves), or on the CPU EP alone with
    runtime="cpu". threads: intra-op threads; isa / precision: OptimEP's options (optim run's)."""

    def __init__(self, path: str | os.PathLike, *, runtime: str = "optim", threads: int | None = None,
                 isa: str | None = None, precision: str | None = None):
        from optim.ep_plugin import cpu_session, session

        self.path = os.fspath(path)
        self.info = read_info(self.path)
        if runtime == "optim":
            options = {k: v for k, v in (("isa", isa), ("precision", precision)) if v}
            self.session = session(self.path, threads=threads, **options)
        elif runtime == "cpu":
            self.session = cpu_session(self.path, threads=threads)
        else:
            raise UserError(f"runtime {runtime!r} is not one of optim, cpu")
        self.runtime = runtime
        self._outputs = [o.name for o in self.session.get_outputs()]

    @classmethod
    def from_session(cls, path: str | os.PathLike, session, runtime: str = "optim") -> CausalLM:
        """The model of ONNX file `path` on a session already made for it (a server's)."""
        model = cls.__new__(cls)
        model.path, model.info, model.session, model.runtime = os.fspath(path), read_info(path), session, runtime
        model._outputs = [o.name for o in session.get_outputs()]
        return model

    def start(self, prompts: list[list[int]]) -> tuple[Batch, np.ndarray]:
        """Prefills the prompts (token ids, left-padded to the longest): the batch state and each row's logits for
        the token after its prompt [batch, vocab]."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise UserError("every prompt needs at least one token")
        bad = [t for p in prompts for t in p if not 0 <= t < self.info.vocab]
        if bad:
            raise UserError(f"token id {bad[0]} is outside the model's vocabulary (0 to {self.info.vocab - 1})")
        longest = max(len(p) for p in prompts)
        ids = np.zeros((len(prompts), longest), np.int64)
        mask = np.zeros((len(prompts), longest), np.int64)
        for row, p in enumerate(prompts):
            ids[row, longest - len(p):] = p
            mask[row, longest - len(p):] = 1
        batch = Batch(np.zeros((len(prompts), 0), np.int64), self.info.empty_cache(len(prompts)))
        return batch, self._run(batch, ids, mask)

    def step(self, batch: Batch, tokens: np.ndarray) -> np.ndarray:
        """Feeds one token per row [batch]; the logits for the next [batch, vocab]."""
        mask = np.ones((len(tokens), 1), np.int64)
        return self._run(batch, tokens.reshape(-1, 1).astype(np.int64), mask)

    def _run(self, batch: Batch, ids: np.ndarray, new_mask: np.ndarray) -> np.ndarray:
        batch.mask = np.concatenate([batch.mask, new_mask], axis=1)
        if self.info.max_positions and batch.length > self.info.max_positions:
            raise UserError(f"the sequence reached {batch.length} tokens, beyond the model's "
                            f"{self.info.max_positions} positions")
        feeds = {"input_ids": ids, "attention_mask": batch.mask, "position_ids": positions(batch.mask, ids.shape[1]),
                 **batch.cache}
        out = self.session.run(self._outputs, feeds)
        batch.cache = dict(zip(batch.cache, out[1:]))
        return out[0][:, -1, :]

