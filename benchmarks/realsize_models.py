"""The real-size suite's models: which registry entry, how to quantize it, and its inputs at any batch.

Every model of SUITE except MiniLM is a `REALSIZE` entry of optim.models (random weights at the published
size); MiniLM is the `minilm` entry (real weights), run at sequence SEQUENCE like BERT-base. SPEECH_OCR are
`COVERAGE` entries, for the coverage table (coverage.py) only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optim.models import example_inputs, get

SEQUENCE = 128  # tokens per sentence for BERT-base and MiniLM


@dataclass(frozen=True)
class SuiteModel:
    name: str
    label: str  # as the tables print it
    op_types: tuple[str, ...] | None = None  # None: quantize every op type onnxruntime can
    exporter: str = "auto"  # optim.exporter's choice: dynamo, falling back to TorchScript


# Transformers: MatMuls only. Quantizing their LayerNorm/Softmax/GELU inputs as well ruins the
# outputs (README: MiniLM's cosine falls to 0.41), and OptimEP has no integer units for those ops.
MATMUL_ONLY = ("MatMul",)
SUITE = [
    SuiteModel("resnet18", "ResNet-18"),
    SuiteModel("resnet50", "ResNet-50"),
    SuiteModel("mobilenetv2", "MobileNetV2"),
    SuiteModel("mobilenetv3_small", "MobileNetV3-small"),
    SuiteModel("mobilenetv3_large", "MobileNetV3-large"),
    SuiteModel("efficientnet_b0", "EfficientNet-B0"),
    SuiteModel("convnext_tiny", "ConvNeXt-tiny"),
    SuiteModel("vit_b16", "ViT-B/16", MATMUL_ONLY),
    SuiteModel("bert_base", f"BERT-base (seq {SEQUENCE})", MATMUL_ONLY),
    SuiteModel("minilm", f"MiniLM-L6 (seq {SEQUENCE})", MATMUL_ONLY),
    # The dynamo exporter specializes SegFormer's batch axis to the example's 1 (optim's exporter then
    # refuses the file, as the batch was asked to be dynamic); TorchScript keeps it dynamic.
    SuiteModel("segformer_b0", "SegFormer-B0 (512x512)", exporter="torchscript"),
]
# Speech and OCR architectures at small sizes (optim.models.COVERAGE): in the coverage table only, not timed.
# Wav2Vec2's conv feature encoder quantizes like a CNN, its transformer like the others (MatMuls only).
SPEECH_OCR = [
    SuiteModel("whisper_encoder", "Whisper-style encoder (tiny width, 2 layers)", MATMUL_ONLY),
    SuiteModel("wav2vec2", "Wav2Vec2-style (conv encoder + 2 layers)", ("Conv", "MatMul")),
    SuiteModel("crnn", "CRNN (conv + BiLSTM)"),
]
BY_NAME = {m.name: m for m in SUITE + SPEECH_OCR}


def model_inputs(name: str, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of `batch` samples for the model `name`, the same for the same seed.

    Images are standard normal, BERT-base's tokens uniform in its id range with a full mask;
    MiniLM gets real tokenized sentences padded to SEQUENCE (as its example inputs do, at 16).
    """
    if name == "minilm":
        from optim.models import minilm

        return minilm.examples(seed=seed, batch=batch, length=SEQUENCE)
    entry = get(name)
    samples = [example_inputs(entry, seed=seed * 1000 + i) for i in range(batch)]
    return {k: np.concatenate([s[k] for s in samples]) for k in samples[0]}
