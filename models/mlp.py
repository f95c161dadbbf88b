"""The zoo's `mlp`: three Linear layers with ReLU, 64 -> 128 -> 128 -> 10."""

from __future__ import annotations

from torch import nn

from .seeding import seeded


class MLP(nn.Module):
    """x (batch, 64) float32 -> logits (batch, 10)."""

    def __init__(self, d_in: int = 64, d_hidden: int = 128, d_out: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def build() -> MLP:
    """The zoo's mlp in eval mode, with the same random weights on every call."""
    with seeded(0):
        return MLP().eval()
