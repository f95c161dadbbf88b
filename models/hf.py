"""Real-size architectures built offline from `transformers` configs, with random weights.

Each factory returns an nn.Module in eval mode, the same weights on every call, whose forward takes
plain tensors and returns one tensor (the classifier's logits, SegFormer's segmentation logits at a
quarter of the input size, BERT's last hidden states), so that exporters see a simple signature.
The configs are the published ones of the named checkpoints (their sizes, not their weights); no
file is downloaded. Attention is "eager" (MatMul / Softmax in the graph, not a fused SDPA call).
"""

from __future__ import annotations

import importlib
import os

import torch
from torch import nn

from .seeding import he_init, seeded


class Logits(nn.Module):
    """Wraps a transformers vision model: pixel tensor -> its `.logits` tensor."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(pixel_values=x).logits


class HiddenStates(nn.Module):
    """Wraps a transformers text encoder: (input_ids, attention_mask) -> last hidden states."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, input_ids, attention_mask):
        return self.net(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def offline_transformers():
    # Never reach for the hub: these models are built from configs alone.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    return transformers


def _build(model_class: str, config_class: str, wrapper: type[nn.Module], model_kwargs: dict | None = None,
           rescale: bool = False, **config) -> nn.Module:
    """`model_class(config_class(**config), **model_kwargs)` with seeded random weights, wrapped, in eval mode.

    model_class is a name in `transformers` or "module:Class" for one it does not export (an encoder alone).
    rescale: re-draw the weights with He scaling (seeding.he_init) where transformers' own initializer lets the
    activations vanish."""
    transformers = offline_transformers()
    cfg = getattr(transformers, config_class)(**config)
    cfg._attn_implementation = "eager"
    module_name, _, class_name = model_class.rpartition(":")
    owner = importlib.import_module(module_name) if module_name else transformers
    with seeded(0), torch.no_grad():
        net = getattr(owner, class_name)(cfg, **(model_kwargs or {}))
        if rescale:
            he_init(net)
    return wrapper(net).eval()


def resnet18() -> nn.Module:
    """ResNet-18 (microsoft/resnet-18's config): basic blocks [2, 2, 2, 2], 1000 classes."""
    return _build("ResNetForImageClassification", "ResNetConfig", Logits, depths=[2, 2, 2, 2], layer_type="basic",
                  hidden_sizes=[64, 128, 256, 512], num_labels=1000)


def resnet50() -> nn.Module:
    """ResNet-50 (microsoft/resnet-50's config): bottlenecks [3, 4, 6, 3], 1000 classes."""
    return _build("ResNetForImageClassification", "ResNetConfig", Logits, depths=[3, 4, 6, 3], layer_type="bottleneck",
                  hidden_sizes=[256, 512, 1024, 2048], num_labels=1000)


def mobilenetv2() -> nn.Module:
    """MobileNetV2 1.0 at 224 (google/mobilenet_v2_1.0_224's config), 1001 classes (background first)."""
    return _build("MobileNetV2ForImageClassification", "MobileNetV2Config", Logits, rescale=True, depth_multiplier=1.0,
                  image_size=224, num_labels=1001)


def efficientnet_b0() -> nn.Module:
    """EfficientNet-B0 (google/efficientnet-b0's config): width and depth 1.0 at 224, 1000 classes."""
    return _build("EfficientNetForImageClassification", "EfficientNetConfig", Logits, rescale=True, width_coefficient=1.0,
                  depth_coefficient=1.0, image_size=224, dropout_rate=0.2, hidden_dim=1280, num_labels=1000)


def convnext_tiny() -> nn.Module:
    """ConvNeXt-T (facebook/convnext-tiny-224's config): depths [3, 3, 9, 3], widths 96-768, 1000 classes."""
    return _build("ConvNextForImageClassification", "ConvNextConfig", Logits, depths=[3, 3, 9, 3],
                  hidden_sizes=[96, 192, 384, 768], num_labels=1000)


def vit_b16() -> nn.Module:
    """ViT-B/16 at 224 (google/vit-base-patch16-224's config): 12 layers, hidden 768, 1000 classes."""
    return _build("ViTForImageClassification", "ViTConfig", Logits, image_size=224, patch_size=16, hidden_size=768,
                  num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, num_labels=1000)


def segformer_b0() -> nn.Module:
    """SegFormer-B0 (nvidia/segformer-b0-finetuned-ade-512-512's config): MiT-b0 encoder, all-MLP
    decoder of width 256, 150 ADE20k classes; logits at a quarter of the input resolution."""
    return _build("SegformerForSemanticSegmentation", "SegformerConfig", Logits, depths=[2, 2, 2, 2],
                  hidden_sizes=[32, 64, 160, 256], decoder_hidden_size=256, num_labels=150)


def bert_base() -> nn.Module:
    """BERT-base (bert-base-uncased's config): 12 layers, hidden 768, 12 heads, no pooler."""
    return _build("BertModel", "BertConfig", HiddenStates, model_kwargs={"add_pooling_layer": False}, hidden_size=768,
                  num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, vocab_size=30522)
