"""A causal LM's session seen with the file's own inputs and outputs, whatever graph the session holds.

A CausalLM on OptimEP runs the graph rewritten to keep its cache in place (llm/cache_layout.py: fixed-capacity
buffers and a CACHE_WRITE_INDICES input). A client of the file's interface (KServe /v2: input_ids, attention_mask,
position_ids and each past_key_values.* [batch, kv_heads, past, head_dim] in; logits and each present.* [batch,
kv_heads, past + sequence, head_dim] out) is served by the same session, so a server loads the weights once for
both its /v1 generation and its /v2 inference: each past goes in as a buffer of capacity past + sequence (its
positions after `past` zero), the write indices say where the new rows go, and each present comes back whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from .cache_layout import CACHE_WRITE_INDICES, write_indices


@dataclass(frozen=True)
class Arg:
    """What an ONNX Runtime NodeArg tells of an input or output: name, type ('tensor(float)') and shape (ints for
    fixed dims, names for symbolic ones, None for unnamed)."""

    name: str
    type: str
    shape: list


def graph_args(values) -> list[Arg]:
    """Args of a graph's inputs or outputs (onnx ValueInfoProtos)."""
    args = []
    for v in values:
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
        args.append(Arg(v.name, f"tensor({onnx.TensorProto.DataType.Name(t.elem_type).lower()})", dims))
    return args


class FileForm:
    """The session protocol (get_inputs, get_outputs, run) of a causal LM file, over `session`, which holds that
    file's graph with its cache kept in place (`in_place`) or the graph as written."""

    def __init__(self, session, inputs: list[Arg], outputs: list[Arg], cache_names: list[str], kv_heads: int,
                 in_place: bool):
        self.session, self._inputs, self._outputs = session, inputs, outputs
        self._cache_names, self._kv_heads, self._in_place = cache_names, kv_heads, in_place

    def get_inputs(self) -> list[Arg]:
        return self._inputs

    def get_outputs(self) -> list[Arg]:
        return self._outputs

    def run(self, output_names, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not self._in_place:
            return self.session.run(output_names, feeds)
        ids, mask = feeds["input_ids"], feeds["attention_mask"]
        rows, sequence = ids.shape
        past = feeds[self._cache_names[0]].shape[2]
        if mask.shape[1] != past + sequence:
            raise ValueError(f"attention_mask covers {mask.shape[1]} positions; the past's {past} and input_ids' "
                             f"{sequence} make {past + sequence}")
        given = dict(feeds)
        for name in self._cache_names:
            value = feeds[name]
            buffer = np.zeros((*value.shape[:2], past + sequence, value.shape[3]), value.dtype)
            buffer[:, :, :past] = value
            given[name] = buffer
        given[CACHE_WRITE_INDICES] = write_indices(rows, self._kv_heads, past, sequence)
        return self.session.run(output_names, given)
