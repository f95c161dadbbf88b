"""The calls into onnxruntime.quantization: static QDQ quantization that calibrates once and can then
quantize again with other nodes kept in float (the ranges come from a calibration cache), and dynamic
quantization. Keeps ORT's advice and progress printing off our stdout and logs."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

from ..errors import OptimizeError

METHODS = ("minmax", "percentile", "entropy")
ACTIVATION_TYPES = ("uint8", "int8")
# Weight precisions: 8 (int8, [-127, 127] symmetric), or 7 ([-64, 64]: onnxruntime's reduce_range), which lets
# OptimEP run exact u8 x s8 kernels on CPUs without VNNI (AVX2: two products summed in int16 never saturate).
WEIGHT_BITS = (8, 7)


@contextlib.contextmanager
def quiet_onnxruntime_quantization():
    """onnxruntime.quantization logs advice (pre-processing, ...) on the root logger and its histogram
    calibrators print progress on stdout, which belongs to our report: keep both quiet. Its module-level
    logging.info() calls also give a root logger without handlers one (logging.basicConfig), after which a
    user's own basicConfig() does nothing: the root logger's handlers are put back as they were."""
    previous = logging.root.manager.disable
    handlers = list(logging.root.handlers)
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)
        logging.root.handlers[:] = handlers


def quantized_op_types(op_types: list[str] | None) -> set[str]:
    """The op types onnxruntime.quantization quantizes given op_types_to_quantize (None: all it knows)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return set(op_types) if op_types else set(QDQRegistry) | set(QLinearOpsRegistry)


class StaticQuantizer:
    """QDQ quantization of the float model at `src`: the first build() calibrates on `batches` and keeps
    the tensor ranges in a cache file under `workdir`; later builds (other nodes in float) reuse them."""

    def __init__(self, src: Path, workdir: Path, batches: list[dict], *, method: str, activation_type: str,
                 per_channel: bool, op_types: list[str] | None, weight_bits: int = 8, progress=None):
        self.src, self.workdir, self.batches = src, workdir, batches
        self.method, self.activation_type, self.per_channel, self.op_types = method, activation_type, per_channel, op_types
        self.weight_bits = weight_bits
        self.say = progress or (lambda _line: None)
        self.cache = workdir / "calibration_ranges.json"

    def build(self, excluded: list[str]) -> Path:
        """Quantizes with `excluded` node names kept in float; returns the path of the QDQ model (overwritten
        by the next build)."""
        from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

        batches, say, method = self.batches, self.say, self.method

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.i = 0

            def get_next(self):
                if self.i >= len(batches):
                    return None
                self.i += 1
                say(f"calibrating ({method}): batch {self.i}/{len(batches)}")
                return batches[self.i - 1]

        dst = self.workdir / "int8.onnx"
        calibrated = self.cache.exists()
        try:
            with quiet_onnxruntime_quantization():
                quantize_static(
                    str(self.src), str(dst), None if calibrated else Reader(), quant_format=QuantFormat.QDQ,
                    op_types_to_quantize=self.op_types, per_channel=self.per_channel, weight_type=QuantType.QInt8,
                    reduce_range=self.weight_bits == 7,
                    activation_type=QuantType.QUInt8 if self.activation_type == "uint8" else QuantType.QInt8,
                    calibrate_method={"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                                      "entropy": CalibrationMethod.Entropy}[method],
                    nodes_to_exclude=list(excluded), calibration_cache_path=str(self.cache))
        except Exception as e:  # the calibrators fail on degenerate data (e.g. constant inputs)
            what = "quantization with cached ranges" if calibrated else f"calibration with {method}"
            raise OptimizeError(f"{what} failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
        return dst


def quantize_dynamic_model(src: Path, dst: Path, *, per_channel: bool, excluded: list[str], op_types: list[str] | None,
                           weight_bits: int = 8) -> Path:
    """Weights-only int8 quantization (activations quantized at run time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with quiet_onnxruntime_quantization():
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=per_channel,
                         reduce_range=weight_bits == 7, nodes_to_exclude=excluded, op_types_to_quantize=op_types)
    return dst
