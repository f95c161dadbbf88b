"""The options of `torch.compile(model, backend="optim", options={...})` and `optim.torch.accelerate`,
checked once, each mistake refused in one sentence (OptionsError, a UserError)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from optim.common.errors import UserError
from optim.ep_plugin import ISAS, PRECISIONS

QUANTIZE_MODES = (None, "int8")
KNOWN = {
    "quantize": "None (float32, the default) or 'int8' (static QDQ; needs calib)",
    "calib": "calibration samples for int8: a list of example input tuples (or dicts by argument name), a callable "
             "returning them, or an iterable",
    "threads": "intra-op threads of each OptimEP session (default: ONNX Runtime's, one per core)",
    "target": "with int8, an accuracy goal on held-out calibration samples, e.g. 'cosine>=0.99': the most "
              "sensitive nodes stay float until it holds",
    "op_types": "with int8, quantize only these op types, e.g. ['MatMul'] for transformers",
    "isa": "OptimEP's kernel set: auto (default), scalar, avx2, avxvnni, avx512, avx512vnni or amx",
    "precision": "OptimEP's float precision: 'fp32' (default) or 'bf16' (MatMul, Gemm and convolutions with bfloat16 "
                 "inputs and float32 sums; needs AVX512-BF16 or AMX-BF16)",
}


class OptionsError(UserError):
    """A bad backend option: one sentence saying which and what is accepted."""


@dataclass(frozen=True)
class BackendOptions:
    """Checked options; `calib` is kept as given (a list, callable or iterable) and read when a graph
    is quantized (samples()), so an iterable is consumed once and remembered."""

    quantize: str | None = None
    calib: Any = None
    threads: int | None = None
    target: str | None = None
    op_types: tuple[str, ...] | None = None
    isa: str = "auto"
    precision: str = "fp32"

    def ep_options(self) -> dict[str, str]:
        options = {} if self.isa == "auto" else {"isa": self.isa}
        return options if self.precision == "fp32" else {**options, "precision": self.precision}


def parse_options(options: Mapping[str, Any] | None) -> BackendOptions:
    """BackendOptions from the dict torch.compile passes (None: the defaults), or OptionsError."""
    if options is None:
        return BackendOptions()
    if not isinstance(options, Mapping):
        raise OptionsError(f"options must be a dict such as {{'quantize': 'int8', 'calib': samples}}, "
                           f"got {type(options).__name__}")
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        raise OptionsError(f"unknown option {unknown[0]!r} for the optim backend; known: {', '.join(KNOWN)}")
    quantize = options.get("quantize")
    if quantize not in QUANTIZE_MODES:
        raise OptionsError(f"quantize must be None or 'int8', got {quantize!r}")
    calib = options.get("calib")
    if quantize == "int8" and calib is None:
        raise OptionsError("quantize='int8' needs calibration samples: add 'calib': [inputs, ...] (tuples of example "
                           "inputs, at least 2: one in five is held out to measure accuracy)")
    if calib is not None and quantize is None:
        raise OptionsError("calib is only used with quantize='int8'")
    if calib is not None and not (callable(calib) or isinstance(calib, Iterable)) or isinstance(calib, (str, bytes, torch.Tensor)):
        raise OptionsError(f"calib must be a list of example input tuples, a callable returning them or an iterable, "
                           f"got {type(calib).__name__}")
    threads = options.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise OptionsError(f"threads must be a positive integer, got {threads!r}")
    target = options.get("target")
    if target is not None:
        if quantize != "int8":
            raise OptionsError("target is an accuracy goal for quantize='int8'; without int8 the outputs are float32")
        _check_target(target)
    op_types = options.get("op_types")
    if op_types is not None:
        if quantize != "int8":
            raise OptionsError("op_types only applies with quantize='int8'")
        if isinstance(op_types, str) or not all(isinstance(t, str) and t for t in op_types):
            raise OptionsError(f"op_types must be a list of ONNX op type names such as ['MatMul'], got {op_types!r}")
        op_types = tuple(op_types)
    isa = options.get("isa", "auto")
    if isa not in ("auto", *ISAS):
        raise OptionsError(f"isa must be one of auto, {', '.join(ISAS)}, got {isa!r}")
    precision = options.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise OptionsError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}")
    return BackendOptions(quantize=quantize, calib=calib, threads=threads, target=target, op_types=op_types, isa=isa,
                          precision=precision)


def _check_target(target: Any) -> None:
    from optim.optimizer.quantization import parse_target

    if not isinstance(target, str):
        raise OptionsError(f"target must be a string such as 'cosine>=0.99', got {type(target).__name__}")
    try:
        parse_target(target)
    except UserError as e:
        raise OptionsError(str(e).replace("--target", "target")) from None


def calibration_samples(calib: Any) -> list:
    """The samples `calib` names: a list as is, a callable's result, an iterable drained."""
    produced: Callable | Iterable = calib() if callable(calib) else calib
    try:
        samples = list(produced)
    except TypeError:
        raise OptionsError(f"calib gave a {type(produced).__name__}, not a list or iterable of samples") from None
    if len(samples) < 2:
        raise OptionsError(f"calib gave {len(samples)} sample(s); int8 needs at least 2: one in five (at least one) is "
                           "held out to measure the accuracy")
    return samples
