"""A CRNN text-line recogniser (the OCR recogniser shape of CRNN / PaddleOCR's rec models): a VGG-style conv
stack turns a 32-pixel-high grey text line into one feature column per 4 pixels of width, a bidirectional
LSTM reads the columns, and a linear layer gives per-column class logits (for CTC decoding)."""

from __future__ import annotations

from torch import nn

from .seeding import randomize_batchnorm, seeded

CLASSES = 37  # CTC blank + 26 letters + 10 digits


def _conv_bn_relu(c_in: int, c_out: int) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


class CRNN(nn.Module):
    """x (batch, 1, 32, width) float32 -> logits (width / 4, batch, CLASSES), time first as CTC losses take them."""

    def __init__(self, channels: tuple[int, ...] = (32, 64, 128, 128), hidden: int = 64, classes: int = CLASSES):
        super().__init__()
        c1, c2, c3, c4 = channels
        # Height 32 -> 1 while width shrinks only 4x: the last pools are tall, not wide (as in CRNN).
        self.features = nn.Sequential(
            *_conv_bn_relu(1, c1), nn.MaxPool2d(2),                       # 16 x W/2
            *_conv_bn_relu(c1, c2), nn.MaxPool2d(2),                      # 8 x W/4
            *_conv_bn_relu(c2, c3), nn.MaxPool2d((2, 1)),                 # 4 x W/4
            *_conv_bn_relu(c3, c4), nn.MaxPool2d((4, 1)),                 # 1 x W/4
        )
        self.rnn = nn.LSTM(c4, hidden, bidirectional=True)
        self.classifier = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.features(x).squeeze(2).permute(2, 0, 1)  # (W/4, batch, channels)
        h, _ = self.rnn(f)
        return self.classifier(h)


def build() -> CRNN:
    """The CRNN in eval mode, with the same random weights and BatchNorm statistics on every call."""
    with seeded(0):
        model = CRNN()
        randomize_batchnorm(model)
    return model.eval()
