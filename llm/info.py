"""What an exported causal LM is (its `optim.causal_lm` metadata) and how its inputs are formed: shared by the
exporter (exporter/causal_lm.py, which writes it) and the generation loop (llm/model.py, which reads it)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from optim.common.errors import UserError

METADATA_KEY = "optim.causal_lm"


@dataclass
class CausalLMInfo:
    """layers, KV heads and head size of the cache, the vocabulary, the end-of-sequence ids (any ends a row), the
    beginning-of-sequence id, the positions the model was trained for, and its transformers model type."""

    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    eos_token_ids: list[int] = field(default_factory=list)
    bos_token_id: int | None = None
    max_positions: int | None = None
    model_type: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CausalLMInfo:
        data = json.loads(text)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def cache_names(self) -> list[str]:
        return [f"past_key_values.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]

    def input_names(self) -> list[str]:
        return ["input_ids", "attention_mask", "position_ids", *self.cache_names()]

    def empty_cache(self, rows: int) -> dict[str, np.ndarray]:
        """The past of a prefill: every cache input with no positions yet, for `rows` rows."""
        empty = np.zeros((rows, self.kv_heads, 0, self.head_dim), np.float32)
        return {name: empty for name in self.cache_names()}

    def output_names(self) -> list[str]:
        return ["logits", *[f"present.{i}.{kv}" for i in range(self.layers) for kv in ("key", "value")]]


def read_info(path: str | os.PathLike) -> CausalLMInfo:
    """The causal-LM metadata of ONNX file `path`; UserError when it has none (not exported as a causal LM)."""
    return info_of(load_graph(path), path)


def load_graph(path: str | os.PathLike) -> onnx.ModelProto:
    """ONNX file `path` without its external data; UserError when it is not one."""
    try:
        return onnx.load(os.fspath(path), load_external_data=False)
    except Exception as e:
        raise UserError(f"{path} is not an ONNX model ({type(e).__name__}: {e})") from None


def info_of(model: onnx.ModelProto, path: str | os.PathLike) -> CausalLMInfo:
    """read_info of a model already loaded from `path`."""
    props = {p.key: p.value for p in model.metadata_props}
    if METADATA_KEY not in props:
        raise UserError(f"{path} was not exported as a causal LM (no {METADATA_KEY} metadata): export the language "
                        f"model with `optim export` (a transformers *ForCausalLM, its folder or an optim.models.LLM name)")
    return CausalLMInfo.from_json(props[METADATA_KEY])


def positions(mask: np.ndarray, sequence: int) -> np.ndarray:
    """position_ids for the last `sequence` columns of attention mask `mask` [batch, total]: each token's index
    among its row's real tokens (left padding does not count; padded places get 1, as transformers does)."""
    pos = np.cumsum(mask, axis=-1) - 1
    return np.where(mask == 0, 1, pos)[:, -sequence:].astype(np.int64)
