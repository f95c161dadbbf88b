"""quantize(): a float ONNX model to int8 QDQ, calibrated, checked and measured.

Static quantization (the default) calibrates activation ranges on the given batches with
onnxruntime.quantization (minmax, percentile or entropy), then inserts QuantizeLinear /
DequantizeLinear pairs: int8 weights per output channel, uint8 or int8 activations per tensor.
Dynamic quantization (`dynamic=True`) quantizes weights only, for MatMul-heavy models without
calibration data. The accuracy report compares the int8 model with the float one on held-out
batches, with the int8 model running on OptimEP (and on ORT's CPU EP when asked).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from ..errors import OptimizeError
from ..model_io import load_model, save_model
from .accuracy import OutputAccuracy, measure_accuracy
from .calibration import CalibrationError, load_calibration, random_calibration

METHODS = ("minmax", "percentile", "entropy")
ACTIVATION_TYPES = ("uint8", "int8")
# Ops whose presence means the model is quantized already.
_QUANTIZED_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
                  "DynamicQuantizeLinear", "QLinearAdd", "QGemm"}
HOLDOUT_FRACTION = 0.2  # of the calibration batches, kept out of calibration to measure accuracy


@dataclass
class QuantizeResult:
    path: str
    mode: str  # "static" or "dynamic"
    method: str | None
    activation_type: str | None
    calibration_batches: int
    evaluation_batches: int
    random_calibration: bool
    excluded: list[str]
    accuracy: list[OutputAccuracy] = field(default_factory=list)
    placement: dict = field(default_factory=dict)  # the int8 model on OptimEP
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["accuracy"] = [a.to_dict() for a in self.accuracy]
        return d


@contextlib.contextmanager
def _quiet_root_logger():
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def _already_quantized(model: onnx.ModelProto) -> list[str]:
    return sorted({n.op_type for n in model.graph.node if n.op_type in _QUANTIZED_OPS})


def _name_unnamed_nodes(model: onnx.ModelProto) -> None:
    """onnxruntime.quantization excludes nodes by name: give unnamed ones unique names first."""
    taken = {n.name for n in model.graph.node if n.name}
    for i, n in enumerate(model.graph.node):
        if not n.name:
            name = f"{n.op_type}_{i}"
            while name in taken:
                name += "_"
            n.name = name
            taken.add(name)


def _excluded_nodes(model: onnx.ModelProto, exclude: list[str]) -> list[str]:
    """Node names matching each --exclude entry, by node name or by op type."""
    names = []
    for entry in exclude:
        hits = [n.name for n in model.graph.node if n.name == entry or n.op_type == entry]
        if not hits:
            raise OptimizeError(f"--exclude {entry!r} matches no node name or op type in the model")
        names += hits
    return sorted(set(names))


def _split(batches: list[dict], evaluation: list[dict] | None) -> tuple[list[dict], list[dict]]:
    if evaluation is not None:
        return batches, evaluation
    if len(batches) < 2:
        raise CalibrationError("one calibration batch cannot also provide held-out batches to measure accuracy; "
                               "give more batches or --eval DATA")
    n_eval = max(1, int(round(len(batches) * HOLDOUT_FRACTION)))
    return batches[:-n_eval], batches[-n_eval:]


def quantize(
    model: str | os.PathLike,
    output: str | os.PathLike,
    *,
    calibration: str | os.PathLike | None = None,
    calibration_random: int | None = None,
    evaluation: str | os.PathLike | None = None,
    method: str = "minmax",
    activation_type: str = "uint8",
    per_channel: bool = True,
    exclude: list[str] | None = None,
    dynamic: bool = False,
    logits: str | None = None,
    compare_cpu: bool = False,
    shapes: dict[str, list[int]] | None = None,
    progress=None,
) -> QuantizeResult:
    """Quantizes `model` into `output` (written only when everything succeeded) and measures it."""
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    from optim.ep_plugin import cpu_session, placement, session

    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    if method not in METHODS:
        raise OptimizeError(f"method {method!r} is not one of {', '.join(METHODS)}")
    if activation_type not in ACTIVATION_TYPES:
        raise OptimizeError(f"activation type {activation_type!r} is not one of {', '.join(ACTIVATION_TYPES)}")
    float_model, external = load_model(model)
    found = _already_quantized(float_model)
    if found:
        raise OptimizeError(f"{model} is already quantized (it has {', '.join(found)}); quantize the float model instead")
    if logits and logits not in [o.name for o in float_model.graph.output]:
        raise OptimizeError(f"--logits {logits!r} is not an output of the model; outputs are "
                            f"{', '.join(o.name for o in float_model.graph.output)}")
    _name_unnamed_nodes(float_model)
    excluded = _excluded_nodes(float_model, exclude or [])
    notes = []
    if dynamic:
        if calibration is not None or calibration_random:
            notes.append("dynamic quantization ignores calibration data (weights only)")
        eval_batches = (load_calibration(evaluation, float_model) if evaluation is not None
                        else random_calibration(float_model, 4, shapes, seed=1))
        calib_batches = []
    elif calibration is not None:
        say(f"reading calibration data from {calibration}")
        batches = load_calibration(calibration, float_model)
        calib_batches, eval_batches = _split(batches, load_calibration(evaluation, float_model) if evaluation else None)
    elif calibration_random:
        notes.append("calibrating on random inputs: the ranges, and so the accuracy figures, say little about real data")
        calib_batches = random_calibration(float_model, calibration_random, shapes, seed=0)
        eval_batches = (load_calibration(evaluation, float_model) if evaluation is not None
                        else random_calibration(float_model, max(1, calibration_random // 4), shapes, seed=1))
    else:
        raise CalibrationError("static quantization needs calibration data: --calib DATA, or --calib-random N "
                               "(or --dynamic for weights only)")

    with tempfile.TemporaryDirectory(prefix="optim-quantize-") as tmp:
        src = Path(tmp) / "float.onnx"
        onnx.save_model(float_model, str(src), save_as_external_data=external)
        dst = Path(tmp) / "int8.onnx"
        # onnxruntime.quantization logs advice (pre-processing, ...) on the root logger: keep it quiet.
        # ...and its histogram calibrators print progress on stdout, which belongs to our report.
        with warnings.catch_warnings(), _quiet_root_logger(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            if dynamic:
                say("quantizing weights (dynamic)")
                quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=per_channel,
                                 nodes_to_exclude=excluded)
            else:
                total = len(calib_batches)

                class Reader(CalibrationDataReader):
                    def __init__(self):
                        self.i = 0

                    def get_next(self):
                        if self.i >= total:
                            return None
                        self.i += 1
                        say(f"calibrating ({method}): batch {self.i}/{total}")
                        return calib_batches[self.i - 1]

                try:
                    quantize_static(
                        str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        weight_type=QuantType.QInt8,
                        activation_type=QuantType.QUInt8 if activation_type == "uint8" else QuantType.QInt8,
                        calibrate_method={"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                                          "entropy": CalibrationMethod.Entropy}[method],
                        nodes_to_exclude=excluded)
                except Exception as e:  # the calibrators fail on degenerate data (e.g. constant inputs)
                    raise OptimizeError(f"calibration with {method} failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
        int8_model, _ = load_model(dst)
        say(f"measuring accuracy on {len(eval_batches)} held-out batch(es)")
        int8_bytes = int8_model.SerializeToString() if int8_model.ByteSize() < (1 << 31) - (64 << 20) else str(dst)
        float_arg = str(src)
        runtimes = {"OptimEP": session(int8_bytes)}
        if compare_cpu:
            runtimes["CPU EP"] = cpu_session(int8_bytes)
        accuracy = measure_accuracy(cpu_session(float_arg), runtimes, eval_batches, logits)
        where = placement(runtimes["OptimEP"]).to_dict()
        save_model(int8_model, output, external=external)
    return QuantizeResult(
        path=str(output), mode="dynamic" if dynamic else "static", method=None if dynamic else method,
        activation_type=None if dynamic else activation_type, calibration_batches=len(calib_batches),
        evaluation_batches=len(eval_batches), random_calibration=bool(calibration_random and not dynamic and calibration is None),
        excluded=excluded, accuracy=accuracy, placement=where, seconds=time.perf_counter() - t0, warnings=notes)
