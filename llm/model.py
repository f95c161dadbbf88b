"""A causal LM exported by `optim export` (exporter/causal_lm.py) as a session with its KV cache: prefill a batch
of prompts, then one token per row per step.

On OptimEP the cache is kept in place (llm/cache_layout.py): the session gets the graph with each cache a buffer of
fixed capacity, [batch, kv_heads, capacity, head_dim], bound as both the past and the present, so a step writes only
its new rows and binds only its small inputs (the buffers are bound again when they grow, doubling). On the CPU EP
(or in_place_cache=False) each step's presents are new arrays, as the file is written.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np
import onnx

from optim.common.errors import UserError

from .cache_layout import CACHE_WRITE_INDICES, LayoutError, fixed_capacity, write_indices
from .file_form import FileForm, graph_args
from .info import info_of, load_graph, positions

log = logging.getLogger("optim.llm")

MIN_CACHE_CAPACITY = 64  # positions a cache buffer holds at least (it doubles when full)


@dataclass
class Batch:
    """The rows being generated: the attention mask over every position so far and the cache of each layer,
    [batch, kv_heads, length, head_dim] arrays; in_place: buffers [batch, kv_heads, capacity >= length, head_dim]
    whose first `length` positions hold the cache (bound to a session's IOBinding, kept with the batch)."""

    mask: np.ndarray  # [batch, total] int64, 0 on left padding
    cache: dict[str, np.ndarray]  # past_key_values.{i}.key / .value
    in_place: bool = False
    binding: object = field(default=None, repr=False, compare=False)  # _Binding: the IOBinding kept with it

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    def cache_view(self, name: str) -> np.ndarray:
        """Cache `name` as [batch, kv_heads, length, head_dim], whatever its capacity (a view, no copy)."""
        return self.cache[name][:, :, :self.length]

    def keep(self, rows: list[int], first: int) -> None:
        """Only rows `rows` and the positions from `first` on stay."""
        length = self.length
        self.mask = self.mask[rows][:, first:]
        self.cache = {k: np.ascontiguousarray(v[rows][:, :, first:length]) for k, v in self.cache.items()}

    def left_padded(self, length: int) -> Batch:
        """This batch with `length - self.length` padding positions in front (mask 0, cache 0)."""
        extra = length - self.length
        if extra == 0:
            return self
        mask = np.concatenate([np.zeros((self.mask.shape[0], extra), np.int64), self.mask], axis=1)
        cache = {}
        for k in self.cache:
            v = self.cache_view(k)
            cache[k] = np.concatenate([np.zeros((*v.shape[:2], extra, v.shape[3]), v.dtype), v], axis=2)
        return Batch(mask, cache, self.in_place)

    def stacked(self, other: Batch) -> Batch:
        """The rows of this batch then `other`'s, the shorter left-padded to the longer's length."""
        length = max(self.length, other.length)
        a, b = self.left_padded(length), other.left_padded(length)
        cache = {k: np.concatenate([a.cache_view(k), b.cache_view(k)]) for k in a.cache}
        return Batch(np.concatenate([a.mask, b.mask]), cache, a.in_place)


class CausalLM:
    """An exported causal LM on OptimEP (ONNX Runtime's CPU EP for what it leaves), or on the CPU EP alone with
    runtime="cpu". threads: intra-op threads; isa / precision (and ep_options): OptimEP's options (optim run's).
    in_place_cache: keep the cache in place (the module docstring); None: on OptimEP when the graph allows it,
    False: never."""

    def __init__(self, path: str | os.PathLike, *, runtime: str = "optim", threads: int | None = None,
                 isa: str | None = None, precision: str | None = None, in_place_cache: bool | None = None,
                 **ep_options: str):
        from optim.ep_plugin import cpu_session, session

        self.path = os.fspath(path)
        graph = load_graph(self.path)  # parsed once: for the metadata and, in place, for the rewrite
        self.info = info_of(graph, self.path)
        self._file_args = graph_args(graph.graph.input), graph_args(graph.graph.output)  # before any rewrite
        self.in_place_cache = False
        if runtime == "optim":
            options = {**ep_options, **{k: v for k, v in (("isa", isa), ("precision", precision)) if v}}
            model, config = self.path, None
            if in_place_cache is not False:
                model = self._fixed_capacity_graph(graph, in_place_cache is True)
                if model is not None:
                    # The graph goes to ONNX Runtime as bytes: its external data is found beside the file.
                    config = {"session.model_external_initializers_file_folder_path":
                              os.path.dirname(os.path.abspath(self.path))}
                    self.in_place_cache = True
            self.session = session(model or self.path, threads=threads, config=config, **options)
        elif runtime == "cpu":
            if ep_options:
                raise UserError(f"OptimEP options ({', '.join(sorted(ep_options))}) need runtime='optim'")
            if in_place_cache:
                raise UserError("in_place_cache needs runtime='optim' (the CPU EP copies its cache every step)")
            self.session = cpu_session(self.path, threads=threads)
        else:
            raise UserError(f"runtime {runtime!r} is not one of optim, cpu")
        self.runtime = runtime
        self._outputs = [o.name for o in self.session.get_outputs()]
        self._cache_pairs = list(zip(self.info.cache_names(), self.info.output_names()[1:]))  # (past, present)
        # The logits' last dim as the graph declares it (else the metadata's vocabulary): their buffer's width.
        width = next((a.shape[-1] for a in self._file_args[1] if a.name == "logits" and a.shape), None)
        self._logits_width = width if isinstance(width, int) and width > 0 else self.info.vocab

    def _fixed_capacity_graph(self, model: onnx.ModelProto, required: bool) -> bytes | None:
        """`model` (this file's graph, rewritten in place) with its caches at a fixed capacity, serialized; None
        when they cannot be (UserError when `required`)."""
        try:
            fixed_capacity(model, self.info)
        except LayoutError as e:
            if required:
                raise UserError(f"{self.path}: the KV cache cannot be kept in place: {e}") from None
            log.info("%s: the KV cache is copied each step (%s)", self.path, e)
            return None
        return model.SerializeToString()

    def file_form(self) -> FileForm:
        """This model's session with the file's own inputs and outputs (past in, present out: what the file says),
        whichever graph it holds: how a server answers KServe /v2 requests on the session /v1 generates with."""
        inputs, outputs = self._file_args
        return FileForm(self.session, inputs, outputs, self.info.cache_names(), self.info.kv_heads,
                        self.in_place_cache)

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
        batch = Batch(np.zeros((rows, 0), np.int64), self.info.empty_cache(rows), self.in_place_cache)
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
        if batch.in_place != self.in_place_cache:
            raise ValueError("this batch was started by a CausalLM with its cache in the other layout")
        if batch.in_place:
            return self._run_in_place(batch, ids)
        feeds = {"input_ids": ids, "attention_mask": batch.mask, "position_ids": positions(batch.mask, ids.shape[1])}
        out = self.session.run(self._outputs, {**feeds, **batch.cache})
        batch.cache = dict(zip(batch.cache, out[1:]))
        return out[0]

    def _run_in_place(self, batch: Batch, ids: np.ndarray) -> np.ndarray:
        """One step writing into the cache buffers where they lie (grown, doubling, when full): they are bound to
        the batch's IOBinding, as past and present both, only when they change, and so are a one-token step's
        inputs but the mask (_DecodeInputs, updated where they lie); the logits go to an array of ours (ORT's output
        objects would cost ~0.1 ms a step to fetch)."""
        total = batch.length
        rows, sequence = ids.shape
        past = total - sequence
        held = batch.binding
        if not (held is not None and held.session is self.session and held.cache is batch.cache
                and total <= held.capacity):  # else the buffers bound last step are still the batch's, with room
            self._bind_cache(batch, rows, total, past)
            held = batch.binding
        io = held.io
        io.bind_cpu_input("attention_mask", batch.mask)
        if sequence == 1 and held.decode is not None and held.decode.rows == rows:
            held.decode.next(ids, past)
        elif sequence == 1:
            held.decode = _DecodeInputs(io, ids, positions(batch.mask, 1), self.info.kv_heads, past)
        else:
            held.decode = None
            io.bind_cpu_input("input_ids", ids)
            io.bind_cpu_input("position_ids", positions(batch.mask, sequence))
            io.bind_cpu_input(CACHE_WRITE_INDICES, write_indices(rows, self.info.kv_heads, past, sequence))
        logits = np.empty((rows, sequence, self._logits_width), np.float32)
        io.bind_output(self._outputs[0], "cpu", 0, np.float32, list(logits.shape), logits.ctypes.data)
        try:
            self.session.run_with_iobinding(io)
        except Exception:
            held.decode = None  # its inputs moved on for a step that did not happen
            raise
        return logits

    def _bind_cache(self, batch: Batch, rows: int, total: int, past: int) -> None:
        """The cache buffers grown where they cannot hold `total` positions, and bound again (with a new IOBinding)
        unless those the batch's binding holds are still its buffers."""
        grown = False
        for name in self.info.cache_names():
            buf = batch.cache[name]
            if buf.shape[2] < total or not buf.flags.c_contiguous:
                bigger = np.empty((rows, self.info.kv_heads, max(2 * total, MIN_CACHE_CAPACITY), self.info.head_dim),
                                  np.float32)
                bigger[:, :, :past] = buf[:, :, :past]
                batch.cache[name] = bigger
                grown = True
        held = batch.binding
        if grown or held is None or held.session is not self.session or any(
                a is not batch.cache[n] for n, a in zip(self.info.cache_names(), held.caches)):
            io = self.session.io_binding()
            for name, present in self._cache_pairs:
                buf = batch.cache[name]
                shape, at = list(buf.shape), buf.ctypes.data
                io.bind_input(name, "cpu", 0, np.float32, shape, at)
                io.bind_output(present, "cpu", 0, np.float32, shape, at)
            batch.binding = held = _Binding(self.session, io, [batch.cache[n] for n in self.info.cache_names()])
        held.cache, held.capacity = batch.cache, min(buf.shape[2] for buf in held.caches)


@dataclass
class _Binding:
    """A batch's IOBinding on `session`: its cache buffers bound as past and present, and a one-token step's inputs."""

    session: object
    io: object
    caches: list  # the buffers bound, in cache_names order
    cache: dict | None = None  # the batch's cache dict they were checked against, and the positions they all hold
    capacity: int = 0
    decode: _DecodeInputs | None = None


class _DecodeInputs:
    """input_ids, position_ids and the write indices of one-token steps, bound once and then updated where they
    lie: from one decode step to the next their shapes stay, each row's position and the written position go up
    by one (its new token's mask is 1), so a step costs three small writes instead of three bindings."""

    def __init__(self, io, ids: np.ndarray, position: np.ndarray, kv_heads: int, past: int):
        self.rows = len(ids)
        self.ids = np.ascontiguousarray(ids, np.int64)
        self.position = np.ascontiguousarray(position, np.int64)
        self.indices = write_indices(self.rows, kv_heads, past, 1)
        for name, value in (("input_ids", self.ids), ("position_ids", self.position),
                            (CACHE_WRITE_INDICES, self.indices)):
            io.bind_input(name, "cpu", 0, np.int64, list(value.shape), value.ctypes.data)

    def next(self, ids: np.ndarray, past: int) -> None:
        self.ids[:] = ids
        self.position += 1
        self.indices[..., 2] = past
