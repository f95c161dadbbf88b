"""Speech encoders built offline from `transformers` configs at small sizes, with random weights (see hf.py):
coverage checks of their architectures (benchmarks/coverage.py), not speed tests. Each forward takes one tensor
and returns the encoder's last hidden states."""

from __future__ import annotations

from torch import nn

from .hf import _build


class Encoded(nn.Module):
    """Wraps a transformers encoder: its one input tensor x (passed as `keyword`) -> last hidden states."""

    def __init__(self, net: nn.Module, keyword: str):
        super().__init__()
        self.net = net
        self.keyword = keyword

    def forward(self, x):
        return self.net(**{self.keyword: x}).last_hidden_state


WHISPER_FRAMES = 200  # log-mel frames (2 s of audio); the encoder takes exactly 2 * max_source_positions


def whisper_encoder() -> nn.Module:
    """A Whisper-style encoder at whisper-tiny's width (80 mels, d_model 384, 6 heads, FFN 1536) with 2 layers and
    2 s of input: two Conv1d + GELU, sinusoidal positions, pre-LayerNorm attention blocks."""
    return _build("transformers.models.whisper.modeling_whisper:WhisperEncoder", "WhisperConfig",
                  lambda net: Encoded(net, "input_features"), num_mel_bins=80,
                  d_model=384, encoder_layers=2, encoder_attention_heads=6, encoder_ffn_dim=1536,
                  max_source_positions=WHISPER_FRAMES // 2)


def wav2vec2() -> nn.Module:
    """A Wav2Vec2-style model at small width: the 7-layer conv feature encoder of wav2vec2-base (kernels 10,3,3,3,3,2,2,
    strides 5,2,2,2,2,2,2, GroupNorm after the first) with 64 channels, a grouped positional conv, 2 transformer
    layers of hidden 96; raw 16 kHz audio in, one frame per 20 ms out."""
    return _build("Wav2Vec2Model", "Wav2Vec2Config",
                  lambda net: Encoded(net, "input_values"), conv_dim=(64,) * 7,
                  hidden_size=96, num_hidden_layers=2, num_attention_heads=4, intermediate_size=192,
                  num_conv_pos_embeddings=32, num_conv_pos_embedding_groups=4, do_stable_layer_norm=False,
                  feat_extract_norm="group", mask_time_prob=0.0)
