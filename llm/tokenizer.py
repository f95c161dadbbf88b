"""Text to token ids and back for `optim generate`: the model folder's tokenizer.json (Hugging Face `tokenizers`),
or, for a model whose vocabulary is 256 bytes (the tiny test configs), one token per UTF-8 byte."""

from __future__ import annotations

import os
from pathlib import Path

from optim.common.errors import UserError

TOKENIZER_FILE = "tokenizer.json"


class ByteTokenizer:
    """One token per byte of the UTF-8 text; decoding replaces a byte sequence that is not UTF-8."""

    vocab = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


class HFTokenizer:
    """A `tokenizers` tokenizer.json."""

    def __init__(self, path: Path):
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise UserError(f"reading {path} needs the tokenizers package: pip install tokenizers ({e})") from None
        self.path = path
        self._tok = Tokenizer.from_file(str(path))
        self.vocab = self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


def load_tokenizer(model: str | os.PathLike, vocab: int, tokenizer: str | os.PathLike | None = None):
    """The tokenizer for the model file `model` of vocabulary `vocab`: `tokenizer` (a tokenizer.json or a folder
    holding one) when given, else the tokenizer.json beside the model, else bytes when the vocabulary is 256.
    Raises UserError saying what to give otherwise."""
    if tokenizer is not None:
        path = Path(tokenizer)
        path = path / TOKENIZER_FILE if path.is_dir() else path
        if not path.is_file():
            raise UserError(f"tokenizer {tokenizer} is not a tokenizer.json (nor a folder with one)")
        return HFTokenizer(path)
    beside = Path(model).parent / TOKENIZER_FILE
    if beside.is_file():
        return HFTokenizer(beside)
    if vocab == ByteTokenizer.vocab:
        return ByteTokenizer()
    raise UserError(f"no tokenizer for {model}: put its tokenizer.json beside it, give --tokenizer, or give the "
                    f"prompt as token ids (--prompt-ids)")
