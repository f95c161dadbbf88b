"""Raising a model below opset 13 to 13 before quantizing it.

onnxruntime's quantizer writes DequantizeLinear with `axis` (per-channel weights, and the int32 bias of a
Conv that Conv+BN folding gave one), which exists only from opset 13; below it the quantized model is
invalid. onnx's version converter rewrites the ops whose meaning changed (Split, Squeeze, Reduce*, ...);
the converted model must give the same outputs on ONNX Runtime's CPU EP, or quantization stops.
"""

from __future__ import annotations

import onnx
from onnx import version_converter

from optim.common.comparison import compare_output

from ..errors import OptimizeError
from ..opset import default_opset

QDQ_OPSET = 13


def raise_to_qdq_opset(model: onnx.ModelProto, batch: dict | None) -> tuple[onnx.ModelProto, int | None]:
    """(model at opset >= 13, the opset it had when it was converted, else None).

    `batch` (inputs by name) checks the converted model against the original on the CPU EP. Raises
    OptimizeError with one sentence when the converter fails or changes the outputs."""
    current = default_opset(model)
    if current == 0 or current >= QDQ_OPSET:
        return model, None
    try:
        converted = version_converter.convert_version(model, QDQ_OPSET)
        onnx.checker.check_model(converted)
    except Exception as e:  # noqa: BLE001 - the converter raises bare RuntimeErrors with C++ text
        reason = " ".join(str(e).split())[:200]
        raise OptimizeError(f"int8 QDQ needs opset {QDQ_OPSET} and this model is at opset {current}, which onnx's version "
                            f"converter could not raise ({reason}); re-export the model at opset {QDQ_OPSET} or later") from None
    if batch is not None:
        _check_same_outputs(model, converted, batch, current)
    return converted, current


def _check_same_outputs(original: onnx.ModelProto, converted: onnx.ModelProto, batch: dict, current: int) -> None:
    from optim.ep_plugin import cpu_session

    names = [o.name for o in original.graph.output]
    want = cpu_session(original, optimization="disable").run(None, batch)
    got = cpu_session(converted, optimization="disable").run(None, batch)
    for name, g, w in zip(names, got, want):
        check = compare_output(name, g, w)
        if not check.passed:
            raise OptimizeError(f"raising the model from opset {current} to {QDQ_OPSET} (needed for int8 QDQ) changed "
                                f"output {name!r} ({check.failure()}); re-export the model at opset {QDQ_OPSET} or later")
