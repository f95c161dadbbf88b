"""One captured graph through optim's pipeline: FX -> ONNX (capture.py), optimize (optim.optimizer), int8
QDQ when asked (optim.optimizer.quantization, calibrated on the samples given), an OptimEP session."""

from __future__ import annotations

import dataclasses
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from .calibration import check_against_call, first_unfit_sample, name_pinned_dim
from .capture import Captured, Plan, capture
from .options import BackendOptions, OptionsError
from .report import GraphReport
from .tensors import to_numpy


@dataclass
class CompiledGraph:
    """A graph ready to run: its final ONNX model (optimized, quantized when asked) and the session."""

    captured: Captured
    model: onnx.ModelProto
    session: ort.InferenceSession


def compile_graph(gm, plan: Plan, args: list, options: BackendOptions, calibration: list[dict] | None,
                  unreached: str, report: GraphReport) -> CompiledGraph:
    """Runs the pipeline on `gm` called with `args` (the first call's), filling `report` (times, placement, accuracy, notes) as it goes.

    `calibration`: batches keyed by the graph's own input names; None keeps an int8 request in float32 for the
    reason `unreached`, which `report.notes` says (and a warning, once per process). CaptureRefused when the graph
    must stay eager; other errors are the exporter's or the optimizer's."""
    from optim.ep_plugin import placement, session

    t0 = time.perf_counter()
    if options.quantize == "int8" and calibration:
        check_against_call(plan, args, calibration)
        plan = _with_calibration_dims(plan, args, calibration)
    try:
        captured = capture(gm, plan, args)
    except Exception as e:
        pinned = name_pinned_dim(plan, args, calibration, str(e)) if calibration and "Constraints violated" in str(e) else None
        if pinned:
            raise OptionsError(pinned) from None
        raise
    report.seconds["capture"] = time.perf_counter() - t0
    feeds = {name: to_numpy(args[p]) for name, p in zip(plan.names, plan.tensor_positions)}
    model = _optimized(captured.model, feeds, report)
    if options.quantize == "int8":
        if calibration is None:
            report.notes.append(f"int8 was asked, but it runs in float32: {unreached}")
            _warn_float_once(report, unreached)
        else:
            try:
                model = _quantized(model, calibration, options, report)
            except Exception as e:
                unfit = first_unfit_sample(model, plan, args, calibration)
                if unfit:
                    raise OptionsError(unfit) from None
                raise
    t0 = time.perf_counter()
    sess = session(model, threads=options.threads, **options.ep_options())
    report.seconds["session"] = time.perf_counter() - t0
    report.placement = placement(sess)
    report.runs_on = "OptimEP"
    return CompiledGraph(captured=captured, model=model, session=sess)


_warned_float = False


def _warn_float_once(report: GraphReport, unreached: str) -> None:
    global _warned_float
    if not _warned_float:
        _warned_float = True
        warnings.warn(f"optim: int8 was asked, but graph {report.index} ({report.name}) runs in float32: {unreached} "
                      "(optim.torch.last_report() lists every graph)", stacklevel=4)


def _with_calibration_dims(plan: Plan, args: list, calibration: list[dict]) -> Plan:
    """The plan with every axis on which a calibration sample's size differs from the call's made dynamic
    (samples of batch 1 calibrate a graph Dynamo captured at batch 8), so the quantizer accepts them."""
    axes = []
    for name, position, dynamic in zip(plan.names, plan.tensor_positions, plan.dynamic_axes):
        shape = tuple(args[position].shape)
        differ = {a for batch in calibration for a, d in enumerate(batch[name].shape) if a < len(shape) and d != shape[a]}
        axes.append(sorted(set(dynamic) | differ))
    return dataclasses.replace(plan, dynamic_axes=axes)


def _optimized(model: onnx.ModelProto, feeds: dict, report: GraphReport) -> onnx.ModelProto:
    from optim.common.errors import UserError
    from optim.optimizer import ProofError, optimize

    t0 = time.perf_counter()
    try:
        result = optimize(model, None, inputs=feeds)
        model = result.model
    except (ProofError, UserError) as e:
        # The exported model is correct as it is: run it unoptimized rather than not at all.
        report.notes.append(f"optimizer skipped: {e}")
    report.seconds["optimize"] = time.perf_counter() - t0
    return model


def _quantized(model: onnx.ModelProto, calibration: list[dict], options: BackendOptions,
               report: GraphReport) -> onnx.ModelProto:
    from optim.optimizer.quantization import quantize

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="optim-torch-") as tmp:
        out = Path(tmp) / "int8.onnx"
        result = quantize(model, out, calibration=calibration, target=options.target,
                          op_types=list(options.op_types) if options.op_types else None)
        quantized = onnx.load(str(out))
    report.mode = "int8"
    report.accuracy = [row for row in result.accuracy if row.runtime == "OptimEP"]
    report.notes += result.warnings
    if result.fallback and result.fallback.get("kept_float"):
        report.notes.append(f"target {options.target}: {len(result.fallback['kept_float'])} node(s) kept in float")
    report.seconds["quantize"] = time.perf_counter() - t0
    return quantized
