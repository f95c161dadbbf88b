"""Decoder-only language models built offline from `transformers` configs, with random weights (no download), and
local Hugging Face folders.

The tiny configs (a few hundred thousand parameters) keep the tests fast; the ~0.1B and ~0.5B ones are real-size for
the benchmarks (their shapes follow TinyLlama / Qwen2-0.5B / GPT-2 small, narrowed where the issue asks for 0.1B).
Each factory returns the transformers model itself (`*ForCausalLM` / `GPT2LMHeadModel`), in eval mode, the same
weights on every call; the exporter wraps it with its KV cache (exporter/causal_lm.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from .hf import offline_transformers
from .seeding import seeded

# The vocabulary of the tiny configs: byte-level, one token per byte (llm/tokenizer.py's ByteTokenizer), so a test
# needs no trained tokenizer.
BYTE_VOCAB = 256


def _build(model_class: str, config_class: str, **config) -> nn.Module:
    transformers = offline_transformers()
    cfg = getattr(transformers, config_class)(**config)
    cfg._attn_implementation = "eager"  # MatMul / Softmax in the graph, not a fused SDPA call
    with seeded(0), torch.no_grad():
        net = getattr(transformers, model_class)(cfg)
    return net.eval()


def llama_tiny() -> nn.Module:
    """Llama-style (RMSNorm, RoPE, grouped-query attention 4:2, SwiGLU): hidden 64, 2 layers, byte vocabulary."""
    return _build("LlamaForCausalLM", "LlamaConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, vocab_size=BYTE_VOCAB, max_position_embeddings=512,
                  bos_token_id=1, eos_token_id=2)


def qwen2_tiny() -> nn.Module:
    """Qwen2-style (Llama's blocks with biased q/k/v projections): hidden 64, 2 layers, 4:2 heads, byte vocabulary."""
    return _build("Qwen2ForCausalLM", "Qwen2Config", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, vocab_size=BYTE_VOCAB, max_position_embeddings=512,
                  bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)


def gpt2_tiny() -> nn.Module:
    """GPT-2-style (LayerNorm, learned positions, GELU MLP, fused QKV Conv1D): hidden 64, 2 layers, 4 heads."""
    return _build("GPT2LMHeadModel", "GPT2Config", n_embd=64, n_layer=2, n_head=4, n_inner=256, vocab_size=BYTE_VOCAB,
                  n_positions=512, bos_token_id=1, eos_token_id=2)


def llama_0_1b() -> nn.Module:
    """A ~0.1B Llama (134M parameters): hidden 768, 12 layers, 12:4 heads, intermediate 2048, vocabulary 32000."""
    return _build("LlamaForCausalLM", "LlamaConfig", hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  num_key_value_heads=4, intermediate_size=2048, vocab_size=32000, max_position_embeddings=2048,
                  bos_token_id=1, eos_token_id=2)


def qwen2_0_5b() -> nn.Module:
    """Qwen2-0.5B's shapes (494M parameters, tied embeddings): hidden 896, 24 layers, 14:2 heads, intermediate
    4864, vocabulary 151936."""
    return _build("Qwen2ForCausalLM", "Qwen2Config", hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                  bos_token_id=151643, eos_token_id=151643, tie_word_embeddings=True)


def gpt2_small() -> nn.Module:
    """GPT-2 small's shapes (124M parameters): hidden 768, 12 layers, 12 heads, vocabulary 50257."""
    return _build("GPT2LMHeadModel", "GPT2Config")


def is_hf_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder with a Hugging Face config.json (a saved model)."""
    return Path(path).is_dir() and (Path(path) / "config.json").is_file()


def load_folder(path: str | os.PathLike) -> nn.Module:
    """The causal LM saved in folder `path` (config.json and its weights), read from that folder only, in eval mode.

    Raises ValueError naming what is missing when the folder has no weights."""
    folder = Path(path)
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise ValueError(f"{folder} has a config.json but no weights (*.safetensors or pytorch_model*.bin)")
    transformers = offline_transformers()
    net = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                            attn_implementation="eager", torch_dtype=torch.float32)
    return net.eval()
