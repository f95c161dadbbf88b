"""The zoo's `transformer`: one pre-LayerNorm encoder block over token ids.

Attention is written out with Linear projections, MatMul and Softmax (not nn.MultiheadAttention)
so the exported graph is plain, predictable ops. There is no positional embedding: the block is
an op-coverage model, and leaving it out keeps the sequence length free.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .seeding import seeded


class SelfAttention(nn.Module):
    """Multi-head self-attention, no mask: (batch, seq, d_model) -> same shape."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by {heads} heads")
        self.heads = heads
        self.head_dim = d_model // heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split_heads(self, x):
        # (b, s, d) -> (b, heads, s, head_dim); unflatten needs no batch/seq sizes, so nothing
        # shape-dependent is baked into the export.
        return x.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)

    def forward(self, x):
        q, k, v = self._split_heads(self.q(x)), self._split_heads(self.k(x)), self._split_heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(context.transpose(1, 2).flatten(2))


class EncoderBlock(nn.Module):
    """input_ids (batch, seq) int64 -> hidden states (batch, seq, d_model) float32."""

    def __init__(self, vocab: int = 100, d_model: int = 64, heads: int = 4, d_ff: int = 128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, input_ids):
        x = self.embed(input_ids)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def build() -> EncoderBlock:
    """The zoo's transformer in eval mode, with the same random weights on every call."""
    with seeded(0):
        model = EncoderBlock()
        # LayerNorm starts as the identity affine map; perturb it so its scale and shift matter.
        with torch.no_grad():
            for ln in (model.ln1, model.ln2):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.normal_(0.0, 0.1)
    return model.eval()
