"""Test models for the exporter, in a real importable module (tests/ is on sys.path): factory
specs (`optimtest_factories:build`) and unpickling both need one."""

from __future__ import annotations

import torch
from torch import nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def build():
    torch.manual_seed(0)
    return Small().eval()


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = self.fc(x)
        return {"logits": h, "features": torch.tanh(h)}


def two_heads():
    torch.manual_seed(0)
    return TwoHeads().eval()


class Pair(nn.Module):
    def forward(self, x):
        return x + 1, x * 2


class DataDependentBranch(nn.Module):
    """torch.export cannot capture a Python `if` on tensor values; tracing follows one branch."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class LoopAndBranch(nn.Module):
    """Data-dependent control flow: only scripting (not tracing) keeps it."""

    def forward(self, x):
        y = x
        for _ in range(x.shape[0]):
            y = y * 0.5 + 1.0
        if bool(x.sum() > 0):
            y = y + 1.0
        else:
            y = y - 1.0
        return y


@torch.library.custom_op("optimtest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


class Twice(nn.Module):
    def forward(self, x):
        return twice(x)


class UsesCustomOp(nn.Module):
    """A custom op (no ONNX translation in either exporter) called inside a submodule."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(nn.ReLU(), Twice())

    def forward(self, x):
        return self.blocks(x) + 1


class SecondSmallest(nn.Module):
    def forward(self, x):
        return torch.kthvalue(x, 2, dim=-1).values


class UsesKthvalue(nn.Module):
    """aten::kthvalue: a PyTorch op neither exporter translates (torch 2.13), called in a submodule."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.pool = SecondSmallest()

    def forward(self, x):
        return self.pool(self.fc(x))


def raises():
    raise RuntimeError("weights server unreachable")


def not_a_module():
    return {"fc": 1}


NOT_CALLABLE = 42


class SampleRateSwitch(nn.Module):
    """forward(x, sr: int): a voice-activity-style front end whose convolution depends on the sample rate;
    `--arg sr=...` bakes the int into the graph."""

    def __init__(self):
        super().__init__()
        self.conv16k = nn.Conv1d(1, 4, 5, stride=2, padding=2)
        self.conv8k = nn.Conv1d(1, 4, 3, padding=1)

    def forward(self, x, sr: int):
        if sr == 16000:
            return torch.relu(self.conv16k(x))
        return torch.sigmoid(self.conv8k(x))


def sample_rate_switch():
    torch.manual_seed(0)
    return SampleRateSwitch().eval()


class SampleRateTensor(SampleRateSwitch):
    """The same switch on a 0-d tensor (`--input sr=16000:int64`): scripted, the branch becomes an ONNX If."""

    def forward(self, x, sr: torch.Tensor):
        if bool(sr == 16000):
            return torch.relu(self.conv16k(x))[:, :, :8]
        return torch.sigmoid(self.conv8k(x))[:, :, :8]


class Cancelling(nn.Module):
    """Unstable in float32: each output is the small difference of two ~1e3 sums (as in untrained nets with
    large activations), so two correct float32 GEMMs that sum in different orders differ by ~1e-3, and
    PyTorch's own float32 differs from its float64 as much."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        weight = torch.randn(64, 1024, generator=g) * 100
        self.a, self.b = nn.Linear(1024, 64, bias=False), nn.Linear(1024, 64, bias=False)
        with torch.no_grad():
            self.a.weight.copy_(weight)
            self.b.weight.copy_(weight + 1e-3 * torch.randn(64, 1024, generator=g))

    def forward(self, x):
        return self.a(x) - self.b(x)


def cancelling():
    return Cancelling().eval()


class Float32Constant(nn.Module):
    """Makes a float32 tensor in forward: PyTorch cannot run it in float64 (float64 @ float32 fails)."""

    def forward(self, x):
        return x @ torch.ones(8, 4)


class BranchyCNN(nn.Module):
    """Every dependency pruning must respect: a residual add, a depthwise convolution between two BatchNorms, a
    concatenation of two branches, and a classifier whose 10 outputs must stay."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                   nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32))
        self.expand = nn.Sequential(nn.Conv2d(32, 64, 1), nn.BatchNorm2d(64), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, groups=64), nn.BatchNorm2d(64), nn.ReLU6())
        self.left = nn.Conv2d(64, 24, 1)
        self.right = nn.Conv2d(64, 40, 3, padding=1)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        x = self.depthwise(self.expand(x))
        x = torch.cat([self.left(x), self.right(x)], dim=1)
        return self.head(x.mean(dim=(2, 3)))


def branchy_cnn():
    torch.manual_seed(0)
    return BranchyCNN().eval()


class OddAttention(nn.Module):
    """Self-attention whose projections have names optim does not know (wq/wk/wv) and whose forward reshapes by a
    fixed head count: pruning it must end in one sentence, not a traceback."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, self.heads, self.hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        a = torch.softmax(q @ k.transpose(-1, -2) / self.hd ** 0.5, dim=-1) @ v
        return x + self.wo(a.transpose(1, 2).reshape(b, s, -1))


def odd_attention():
    torch.manual_seed(0)
    return OddAttention().eval()
