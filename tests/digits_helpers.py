"""scikit-learn's bundled digits (8x8 images, offline) and a small CNN trained on them, defined in a module file the
way a user's training code would be (`optim export digits_net:build --weights digits.pt`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NET_SOURCE = (
    "from torch import nn\n"
    "class DigitsNet(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),\n"
    "                                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())\n"
    "        self.head = nn.Linear(32 * 4 * 4, 10)\n"
    "    def forward(self, x):\n"
    "        return self.head(self.features(x))\n"
    "def build():\n"
    "    return DigitsNet()\n")
TRAIN = 1500  # images to train on (of 1797); the rest are the test set


@dataclass
class Digits:
    folder: Path  # holds digits_net.py and digits.pt
    weights: Path
    x: np.ndarray  # [N, 1, 8, 8] float32 in [0, 1]
    y: np.ndarray  # [N] int64
    train: np.ndarray  # indices
    test: np.ndarray


def trained_digits(folder: Path) -> Digits:
    """Writes digits_net.py into `folder`, trains it (12 epochs, one thread: the same weights on every machine) and
    saves digits.pt; `folder` is left off sys.path (callers put it there while they load the factory)."""
    import torch
    from sklearn.datasets import load_digits
    from torch import nn

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[:TRAIN], order[TRAIN:]
    (folder / "digits_net.py").write_text(NET_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        import digits_net

        torch.manual_seed(0)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            net = digits_net.build()
            opt = torch.optim.Adam(net.parameters(), lr=3e-3)
            xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
            for _ in range(12):
                for i in range(0, len(train), 64):
                    opt.zero_grad()
                    nn.functional.cross_entropy(net(xt[i:i + 64]), yt[i:i + 64]).backward()
                    opt.step()
        finally:
            torch.set_num_threads(threads)
        torch.save(net.state_dict(), folder / "digits.pt")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("digits_net", None)
    return Digits(folder, folder / "digits.pt", x, y, train, test)
