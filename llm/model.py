"""A causal LM exported by `optim export` (exporter/causal_lm.py) as a session with its KV cache: prefill a batch
of prompts, then one token per row per step.

On OptimEP the cache is kept in place (llm/cache_layout.py): the graph is given to the session with its caches
sequence-first, and each cache lives in one growing buffer whose first `past` rows are bound as the past and first
`past + sequence` rows as the present, so a step writes only its new rows. On the CPU EP (or in_place_cache=False)
each step's presents are new arrays, as the file is written.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
import onnx

from optim.common.errors import UserError

from .cache_layout import LayoutError, sequence_first
from .info import positions, read_info

log = logging.getLogger("optim.llm")

MIN_CACHE_CAPACITY = 64  # rows a sequence-first cache buffer holds at least (it doubles when full)


@dataclass
class Batch:
    """The rows being generated: the attention mask over every position so far and the cache of each layer.
    sequence_first: the cache's arrays are [capacity >= length, batch, kv_heads, head_dim] buffers whose first
    `length` rows hold the cache (else [batch, kv_heads, length, head_dim] arrays, the exported layout)."""

    mask: np.ndarray  # [batch, total] int64, 0 on left padding
    cache: dict[str, np.ndarray]  # past_key_values.{i}.key / .value
    sequence_first: bool = False

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    def cache_view(self, name: str) -> np.ndarray:
        """Cache `name` as [batch, kv_heads, length, head_dim], whatever the layout (a view, no copy)."""
        v = self.cache[name]
        return v[:self.length].transpose(1, 2, 0, 3) if self.sequence_first else v

    def keep(self, rows: list[int], first: int) -> None:
        """Only rows `rows` and the positions from `first` on stay."""
        length = self.length
        self.mask = self.mask[rows][:, first:]
        if self.sequence_first:
            self.cache = {k: np.ascontiguousarray(v[first:length][:, rows]) for k, v in self.cache.items()}
        else:
            self.cache = {k: v[rows][:, :, first:] for k, v in self.cache.items()}

    def left_padded(self, length: int) -> Batch:
        """This batch with `length - self.length` padding positions in front (mask 0, cache 0)."""
        extra = length - self.length
        if extra == 0:
            return self
        mask = np.concatenate([np.zeros((self.mask.shape[0], extra), np.int64), self.mask], axis=1)
        axis = 0 if self.sequence_first else 2
        cache = {}
        for k, v in self.cache.items():
            v = v[:self.length] if self.sequence_first else v
            pad = list(v.shape)
            pad[axis] = extra
            cache[k] = np.concatenate([np.zeros(pad, v.dtype), v], axis=axis)
        return Batch(mask, cache, self.sequence_first)

    def stacked(self, other: Batch) -> Batch:
        """The rows of this batch then `other`'s, the shorter left-padded to the longer's length."""
        length = max(self.length, other.length)
        a, b = self.left_padded(length), other.left_padded(length)
        if a.sequence_first:
            cache = {k: np.concatenate([a.cache[k][:length], b.cache[k][:length]], axis=1) for k in a.cache}
        else:
            cache = {k: np.concatenate([a.cache[k], b.cache[k]]) for k in a.cache}
        return Batch(np.concatenate([a.mask, b.mask]), cache, a.sequence_first)


class CausalLM:
    """An exported causal LM on OptimEP (ONNX Runtime's CPU EP for what it leaves), or on the CPU EP alone with
    runtime="cpu". threads: intra-op threads; isa / precision: OptimEP's options (optim run's). in_place_cache:
    keep the cache in place (the module docstring); None: on OptimEP when the graph allows it, False: never."""

    def __init__(self, path: str | os.PathLike, *, runtime: str = "optim", threads: int | None = None,
                 isa: str | None = None, precision: str | None = None, in_place_cache: bool | None = None):
        from optim.ep_plugin import cpu_session, session

        self.path = os.fspath(path)
        self.info = read_info(self.path)
        self.in_place_cache = False
        if runtime == "optim":
            options = {k: v for k, v in (("isa", isa), ("precision", precision)) if v}
            model, config = self.path, None
            if in_place_cache is not False:
                model = self._sequence_first_graph(in_place_cache is True)
                if model is not None:
                    # The graph goes to ONNX Runtime as bytes: its external data is found beside the file.
                    config = {"session.model_external_initializers_file_folder_path":
                              os.path.dirname(os.path.abspath(self.path))}
                    self.in_place_cache = True
            self.session = session(model or self.path, threads=threads, config=config, **options)
        elif runtime == "cpu":
            if in_place_cache:
                raise UserError("in_place_cache needs runtime='optim' (the CPU EP copies its cache every step)")
            self.session = cpu_session(self.path, threads=threads)
        else:
            raise UserError(f"runtime {runtime!r} is not one of optim, cpu")
        self.runtime = runtime
        self._outputs = [o.name for o in self.session.get_outputs()]

    def _sequence_first_graph(self, required: bool) -> bytes | None:
        model = onnx.load(self.path, load_external_data=False)
        try:
            sequence_first(model, self.info)
        except LayoutError as e:
            if required:
                raise UserError(f"{self.path}: the KV cache cannot be kept in place: {e}") from None
            log.info("%s: the KV cache is copied each step (%s)", self.path, e)
            return None
        return model.SerializeToString()

    @classmethod
    def from_session(cls, path: str | os.PathLike, session, runtime: str = "optim") -> CausalLM:
        """The model of ONNX file `path` on a session already made for it (a server's)."""
        model = cls.__new__(cls)
        model.path, model.info, model.session, model.runtime = os.fspath(path), read_info(path), session, runtime
        model.in_place_cache = False
        model._outputs = [o.name for o in session.get_outputs()]
        return model

    def start(self, prompts: list[list[int]], every_position: bool = False) -> tuple[Batch, np.ndarray]:
        """Prefills the prompts (token ids, left-padded to the longest): the batch state and each row's logits for
        the token after its prompt [batch, vocab] (every_position: after each position, [batch, longest, vocab])."""
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
        rows = len(prompts)
        if self.in_place_cache:
            empty = np.zeros((0, rows, self.info.kv_heads, self.info.head_dim), np.float32)
            cache = {name: empty for name in self.info.cache_names()}
        else:
            cache = self.info.empty_cache(rows)
        batch = Batch(np.zeros((rows, 0), np.int64), cache, self.in_place_cache)
        logits = self._run(batch, ids, mask)
        return batch, logits if every_position else logits[:, -1, :]

    def step(self, batch: Batch, tokens: np.ndarray) -> np.ndarray:
        """Feeds one token per row [batch]; the logits for the next [batch, vocab]."""
        mask = np.ones((len(tokens), 1), np.int64)
        return self._run(batch, tokens.reshape(-1, 1).astype(np.int64), mask)[:, -1, :]

    def _run(self, batch: Batch, ids: np.ndarray, new_mask: np.ndarray) -> np.ndarray:
        batch.mask = np.concatenate([batch.mask, new_mask], axis=1)
        if self.info.max_positions and batch.length > self.info.max_positions:
            raise UserError(f"the sequence reached {batch.length} tokens, beyond the model's "
                            f"{self.info.max_positions} positions")
        feeds = {"input_ids": ids, "attention_mask": batch.mask, "position_ids": positions(batch.mask, ids.shape[1])}
        if batch.sequence_first != self.in_place_cache:
            raise ValueError("this batch was started by a CausalLM with its cache in the other layout")
        if batch.sequence_first:
            return self._run_in_place(batch, feeds, batch.length - ids.shape[1])
        out = self.session.run(self._outputs, {**feeds, **batch.cache})
        batch.cache = dict(zip(batch.cache, out[1:]))
        return out[0]

    def _run_in_place(self, batch: Batch, feeds: dict[str, np.ndarray], past: int) -> np.ndarray:
        """One step with each cache's past and present bound to one buffer (grown, doubling, when it is full)."""
        total = batch.length
        io = self.session.io_binding()
        io.bind_output(self._outputs[0], "cpu")  # the logits, first: get_outputs() follows the binding order
        for name, value in feeds.items():
            io.bind_cpu_input(name, value)
        for name, present in zip(self.info.cache_names(), self.info.output_names()[1:]):
            buf = batch.cache[name]
            if buf.shape[0] < total or not buf.flags.c_contiguous:
                grown = np.empty((max(2 * total, MIN_CACHE_CAPACITY), *buf.shape[1:]), np.float32)
                grown[:past] = buf[:past]
                batch.cache[name] = buf = grown
            rest = list(buf.shape[1:])
            io.bind_input(name, "cpu", 0, np.float32, [past, *rest], buf.ctypes.data)
            io.bind_output(present, "cpu", 0, np.float32, [total, *rest], buf.ctypes.data)
        self.session.run_with_iobinding(io)
        return io.get_outputs()[0].numpy()

