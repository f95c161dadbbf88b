"""The parts of `optim prune` that decide what goes and how recovery batches: the Taylor importance (it must rank
by how far a channel moves the outputs, also when the outputs are normalised) and the token-mask batching (cut
only where exact, losses on real tokens only)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_pruning")

from torch import nn  # noqa: E402

from optim.pruning.batches import (cut_padding, cutting_is_exact, length_batches, random_batches,  # noqa: E402
                                   token_mask_name)
from optim.pruning.data import Samples  # noqa: E402
from optim.pruning.importance import taylor_gradients  # noqa: E402
from optim.pruning.pruner import prune_model  # noqa: E402
from optim.pruning.recover import _relative_mse  # noqa: E402
from optim.pruning.structure import find_structure  # noqa: E402


class _Embedder(nn.Module):
    """A two-layer MLP whose output is L2-normalised, like a sentence embedding: its energy is constant."""

    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return nn.functional.normalize(self.down(torch.relu(self.up(x))), dim=-1)


def _forward(model, batch):
    return [model(*(torch.from_numpy(v) for v in batch.inputs.values()))]


def _output_change_per_unit(model, x) -> np.ndarray:
    """The squared change of the outputs when each hidden unit is removed alone: what the importance estimates."""
    with torch.no_grad():
        reference = model(x)
        changes = []
        for unit in range(model.up.out_features):
            twin = copy.deepcopy(model)
            twin.down.weight[:, unit] = 0
            changes.append(float(((twin(x) - reference) ** 2).sum()))
    return np.array(changes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_taylor_keeps_the_units_that_move_the_normalised_outputs_most(seed):
    # The outputs' energy (the former unlabelled loss) has no gradient here; its noise kept 5-7 of the 8 right units
    torch.manual_seed(seed)
    model = _Embedder().eval()
    with torch.no_grad():  # units of very different weight: magnitude alone does not decide
        model.up.weight.mul_(torch.rand(16, 1) * 3)
        model.down.weight.mul_(torch.rand(1, 16) * 3)
    x = np.random.default_rng(seed).standard_normal((64, 8)).astype(np.float32)
    most = set(np.argsort(-_output_change_per_unit(model, torch.from_numpy(x)))[:8].tolist())
    up = model.up.weight.detach().clone()
    args = (torch.from_numpy(x[:2]),)
    structure = find_structure(model, args, lambda out: [out])
    prune_model(model, args, structure, [0.5], "taylor", None, lambda out: [out],
                taylor_gradients(Samples({"x": x}), _forward, None))
    kept = {int(torch.argmin((up - row).abs().sum(1))) for row in model.up.weight.detach()}
    assert len(kept) == 8 and len(kept & most) >= 7


def test_taylor_gradients_are_squared_per_batch_and_restored_as_grads():
    model = _Embedder()
    x = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
    taylor_gradients(Samples({"x": x}), _forward, None)(model)
    for p in model.parameters():
        assert p.grad is not None and float(p.grad.min()) >= 0 and float(p.grad.max()) > 0


def _texts(lengths, width=12):
    ids = np.zeros((len(lengths), width), np.int64)
    mask = np.zeros((len(lengths), width), np.int64)
    for i, n in enumerate(lengths):
        ids[i, :n] = np.arange(1, n + 1)
        mask[i, :n] = 1
    return Samples({"input_ids": ids, "attention_mask": mask})


class _MaskedMean(nn.Module):
    """Mean of embeddings over the real tokens (padding ignored), and the same plus the padding count (not)."""

    def __init__(self, honour_mask: bool):
        super().__init__()
        self.embed, self.honour = nn.Embedding(20, 4), honour_mask

    def forward(self, input_ids, attention_mask):
        m = attention_mask.unsqueeze(-1).float()
        e = self.embed(input_ids)
        if not self.honour:
            m = torch.ones_like(m)
        return (e * m).sum(1) / m.sum(1)


class _PerToken(nn.Module):
    """Per-token outputs ([batch, sequence, 4]): a cut compares the positions kept."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 4)

    def forward(self, input_ids, attention_mask):
        return self.embed(input_ids) * attention_mask.unsqueeze(-1).float()


def test_the_token_mask_is_found_by_name_shape_and_values():
    texts = _texts([3, 5, 12])
    assert token_mask_name(texts) == "attention_mask"
    texts.inputs["attention_mask"][0, 0] = 2
    assert token_mask_name(texts) is None
    assert token_mask_name(Samples({"x": np.zeros((2, 3), np.float32)})) is None


def test_padding_is_cut_only_where_the_outputs_stay_the_same():
    texts = _texts([3, 5, 7, 4, 2, 6, 3, 5, 4, 3])
    cut = cut_padding(texts.take(np.arange(2)), "attention_mask")
    assert cut.inputs["input_ids"].shape == (2, 5) and cut.inputs["attention_mask"].shape == (2, 5)
    assert cutting_is_exact(_MaskedMean(True), texts, "attention_mask", _forward)
    assert not cutting_is_exact(_MaskedMean(False), texts, "attention_mask", _forward)
    assert cutting_is_exact(_PerToken(), texts, "attention_mask", _forward)
    assert not cutting_is_exact(_MaskedMean(True), _texts([12] * 10), "attention_mask", _forward)  # nothing to cut


def test_length_batches_group_similar_lengths_and_cover_every_sample_each_epoch():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 13, 64)
    texts = _texts(lengths)
    texts.inputs["input_ids"][:, 0] = np.arange(64)  # a sample's identity in its first token
    batches = length_batches(texts, 4, "attention_mask", np.random.default_rng(1))
    epoch = [next(batches) for _ in range(16)]
    seen = np.concatenate([b.inputs["input_ids"][:, 0] for b in epoch])
    assert sorted(seen) == list(range(64))
    spread = np.mean([np.ptp(b.inputs["attention_mask"].sum(1)) for b in epoch])
    randomly = np.mean([np.ptp(lengths[rng.choice(64, 4, replace=False)]) for _ in range(200)])
    assert spread < randomly / 2
    assert all(b.inputs["input_ids"].shape[1] == b.inputs["attention_mask"].sum(1).max() for b in epoch)
    plain = random_batches(texts, 4, np.random.default_rng(1))
    assert next(plain).inputs["input_ids"].shape == (4, 12)


def test_hidden_states_are_compared_on_real_tokens_only():
    want = torch.ones(2, 3, 4)
    got = want.clone()
    got[:, 2] = 100.0  # padding positions wildly off
    tokens = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    assert float(_relative_mse(got, want, tokens)) == 0.0
    assert float(_relative_mse(got, want)) > 1.0
    assert float(_relative_mse(got[:, :, :1].reshape(2, 3), want[:, :, 0], tokens)) == 0.0  # [batch, sequence] too
