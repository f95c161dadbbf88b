"""quantize(): a float ONNX model to int8 QDQ, calibrated, checked and measured.

Static quantization (the default) calibrates activation ranges on the given batches with
onnxruntime.quantization (minmax, percentile or entropy), then inserts QuantizeLinear /
DequantizeLinear pairs: int8 weights per output channel, uint8 or int8 activations per tensor.
Dynamic quantization (`dynamic=True`) quantizes weights only, for MatMul-heavy models without
calibration data. The accuracy report compares the int8 model with the float one on held-out
batches, with the int8 model running on OptimEP (and on ORT's CPU EP when asked). With a `target`
(e.g. "cosine>=0.995") the most sensitive nodes are kept in float until it holds (fallback.py).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from ..errors import OptimizeError
from ..graph import GraphView
from ..model_io import load_model, model_source, save_model
from .accuracy import OutputAccuracy, Reference
from .backend import ACTIVATION_TYPES, METHODS, WEIGHT_BITS, StaticQuantizer, quantize_dynamic_model, quantized_op_types
from .calibration import CalibrationError, load_calibration, random_calibration
from .fallback import search
from .qdq_opset import QDQ_OPSET, raise_to_qdq_opset
from .recipe import choose_recipe, is_transformer_like, worst_cosine
from .slices import concat_traps, output_slices
from .target import parse_target

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
    excluded: list[str]  # asked for (--exclude); the fallback's own are in fallback["kept_float"]
    accuracy: list[OutputAccuracy] = field(default_factory=list)
    placement: dict = field(default_factory=dict)  # the int8 model on OptimEP
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    op_types: list[str] | None = None  # the op types quantized (None: every type onnxruntime can)
    fallback: dict | None = None  # with a target: FallbackResult.to_dict()
    opset_converted_from: int | None = None  # the model's opset when it had to be raised to 13 first
    kept_float_ranges: list[dict] = field(default_factory=list)  # Concats kept float: {"node", "reason"} (slices.py)
    weight_bits: int = 8  # 8: int8 weights in [-127, 127]; 7: in [-64, 64] (exact u8 x s8 kernels without VNNI)
    recipe: dict | None = None  # a transformer-like model's default op types: recipe.Recipe.to_dict()

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["accuracy"] = [a.to_dict() for a in self.accuracy]
        return d


def weight_bits_hint(isa: str | None, weight_bits: int, integer_units: int) -> str | None:
    """A note when OptimEP runs this model's integer units on a CPU without VNNI with 8-bit weights: there they run
    on int16 pairs, and 7-bit weights would take the u8 x s8 kernels."""
    if weight_bits != 8 or integer_units == 0 or isa not in ("avx2", "avx512"):
        return None
    return (f"this CPU has no VNNI (OptimEP's kernels: {isa}): 8-bit weights run on int16 pairs here; --weight-bits 7 "
            "runs the u8 x s8 kernels, up to twice as fast on AVX2, at the accuracy cost the report then shows")


class CollapseError(OptimizeError):
    """An output (or a part of one) lost its signal in int8; nothing was written."""


def _collapse_message(row: OutputAccuracy) -> str:
    part = next((s for s in row.slices if s.collapsed), None)
    what = f"output '{row.output}'" + (f", the part from {part.part}," if part else "")
    levels, cosine = (part.levels, part.cosine) if part else (row.levels, row.cosine)
    how = "its int8 values are all one level" if levels == 1 else f"cosine {cosine:.3f} against float"
    return (f"{what} collapsed in int8 ({how}; the whole output's cosine is {row.cosine:.5f}). Keep the nodes that make "
            "it in float (--exclude NODE or an op type), or give --allow-loss to write the model anyway")


def _already_quantized(model: onnx.ModelProto) -> list[str]:
    return sorted({n.op_type for n in model.graph.node if n.op_type in _QUANTIZED_OPS})


def _name_unnamed_nodes(model: onnx.ModelProto) -> None:
    """onnxruntime.quantization excludes nodes by name: give unnamed ones unique names first."""
    view = GraphView(model)
    for i, n in enumerate(model.graph.node):
        if not n.name:
            n.name = view.fresh_name(f"{n.op_type}_{i}")


def _excluded_nodes(model: onnx.ModelProto, exclude: list[str]) -> list[str]:
    """Node names matching each --exclude entry, by node name or by op type."""
    names = []
    for entry in exclude:
        hits = [n.name for n in model.graph.node if n.name == entry or n.op_type == entry]
        if not hits:
            raise OptimizeError(f"--exclude {entry!r} matches no node name or op type in the model")
        names += hits
    return sorted(set(names))


def _check_op_types(model: onnx.ModelProto, op_types: list[str] | None) -> list[str] | None:
    if not op_types:
        return None
    present = {n.op_type for n in model.graph.node}
    missing = [t for t in op_types if t not in present]
    if missing:
        raise OptimizeError(f"--op-types {missing[0]!r} matches no node in the model; it has {', '.join(sorted(present))}")
    return list(dict.fromkeys(op_types))


def _split(batches: list[dict], evaluation: list[dict] | None) -> tuple[list[dict], list[dict]]:
    if evaluation is not None:
        return batches, evaluation
    if len(batches) < 2:
        raise CalibrationError("one calibration batch cannot also provide held-out batches to measure accuracy; "
                               "give more batches or --eval DATA")
    n_eval = max(1, int(round(len(batches) * HOLDOUT_FRACTION)))
    return batches[:-n_eval], batches[-n_eval:]


def _batches(float_model: onnx.ModelProto, dynamic: bool, calibration, calibration_random: int | None, evaluation,
             shapes, say, notes: list[str]) -> tuple[list[dict], list[dict]]:
    """(calibration batches, held-out batches) from the sources given; warnings go to `notes`."""
    if dynamic:
        if calibration is not None or calibration_random:
            notes.append("dynamic quantization ignores calibration data (weights only)")
        return [], (load_calibration(evaluation, float_model) if evaluation is not None
                    else random_calibration(float_model, 4, shapes, seed=1))
    if calibration is not None:
        say("reading calibration data" + ("" if isinstance(calibration, (list, tuple)) else f" from {calibration}"))
        batches = load_calibration(calibration, float_model)
        return _split(batches, load_calibration(evaluation, float_model) if evaluation else None)
    if calibration_random:
        notes.append("calibrating on random inputs: the ranges, and so the accuracy figures, say little about real data")
        return (random_calibration(float_model, calibration_random, shapes, seed=0),
                load_calibration(evaluation, float_model) if evaluation is not None
                else random_calibration(float_model, max(1, calibration_random // 4), shapes, seed=1))
    raise CalibrationError("static quantization needs calibration data: --calib DATA, or --calib-random N "
                           "(or --dynamic for weights only)")


def quantize(
    model: str | os.PathLike,
    output: str | os.PathLike,
    *,
    calibration: str | os.PathLike | list[dict] | None = None,
    calibration_random: int | None = None,
    evaluation: str | os.PathLike | None = None,
    method: str = "minmax",
    activation_type: str = "uint8",
    per_channel: bool = True,
    weight_bits: int = 8,
    allow_loss: bool = False,
    exclude: list[str] | None = None,
    op_types: list[str] | None = None,
    dynamic: bool = False,
    logits: str | None = None,
    target: str | None = None,
    max_float: int | None = None,
    compare_cpu: bool = False,
    shapes: dict[str, list[int]] | None = None,
    progress=None,
) -> QuantizeResult:
    """Quantizes `model` into `output` (written only when everything succeeded) and measures it.

    calibration: an .npz file, a folder of them, `module:function`, or a list of input dicts in memory.

    op_types: quantize only nodes of these types (e.g. ["MatMul"]). Default: every type onnxruntime can, except for
    a model with attention and a LayerNorm whose worst output falls below recipe.RECIPE_COSINE that way: then
    MatMul (and Conv) only when that is closer to float (result.recipe says which and why).
    weight_bits: 8, or 7 for weights in [-64, 64], which OptimEP runs on its exact u8 x s8 kernels on CPUs without
    VNNI (AVX2), up to twice as fast there as 8-bit weights, for some accuracy (the report measures it).
    A Concat whose inputs' ranges differ by more than slices.RANGE_RATIO_LIMIT stays float (kept_float_ranges). An
    output, or a part of one a Concat made, that collapses in int8 (accuracy.COLLAPSE_COSINE) is a CollapseError
    (nothing written) unless allow_loss.
    target: "cosine>=X", "mean_cosine>=X", "sqnr>=DB" or "top1>=F" on the held-out batches on OptimEP:
    the most sensitive nodes (at most max_float) stay float until it holds; FallbackError (an
    OptimizeError, nothing written) when it cannot be met."""
    from optim.ep_plugin import cpu_session, placement, session

    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    if method not in METHODS:
        raise OptimizeError(f"method {method!r} is not one of {', '.join(METHODS)}")
    if activation_type not in ACTIVATION_TYPES:
        raise OptimizeError(f"activation type {activation_type!r} is not one of {', '.join(ACTIVATION_TYPES)}")
    if weight_bits not in WEIGHT_BITS:
        raise OptimizeError(f"weight bits {weight_bits!r} is not one of {', '.join(map(str, WEIGHT_BITS))}")
    goal = parse_target(target, logits) if target is not None else None
    if goal and dynamic:
        raise OptimizeError("--target needs static quantization (calibration data); it cannot be used with --dynamic")
    if max_float is not None and goal is None:
        raise OptimizeError("--max-float only applies with --target")
    if max_float is not None and max_float < 1:
        raise OptimizeError(f"--max-float must be at least 1, got {max_float}")
    float_model, external = load_model(model)
    found = _already_quantized(float_model)
    if found:
        raise OptimizeError(f"{model} is already quantized (it has {', '.join(found)}); quantize the float model instead")
    if logits and logits not in [o.name for o in float_model.graph.output]:
        raise OptimizeError(f"--logits {logits!r} is not an output of the model; outputs are "
                            f"{', '.join(o.name for o in float_model.graph.output)}")
    _name_unnamed_nodes(float_model)
    excluded = _excluded_nodes(float_model, exclude or [])
    op_types = _check_op_types(float_model, op_types)
    notes: list[str] = []
    calib_batches, eval_batches = _batches(float_model, dynamic, calibration, calibration_random, evaluation, shapes,
                                           say, notes)
    float_model, converted_from = raise_to_qdq_opset(float_model, (eval_batches or calib_batches or [None])[0])
    if converted_from is not None:
        say(f"converted the model from opset {converted_from} to {QDQ_OPSET} (int8 QDQ needs it); outputs unchanged")

    fallback = recipe = None
    traps = [] if dynamic else [t for t in concat_traps(float_model, calib_batches) if t.node not in excluded]
    for trap in traps:
        say(trap.reason)
    with tempfile.TemporaryDirectory(prefix="optim-quantize-") as tmp:
        src = Path(tmp) / "float.onnx"
        onnx.save_model(float_model, str(src), save_as_external_data=external)
        reference = Reference(cpu_session(str(src)), eval_batches, logits, output_slices(float_model))
        if dynamic:
            say("quantizing weights (dynamic)")
            int8_model, _ = load_model(quantize_dynamic_model(src, Path(tmp) / "int8.onnx", per_channel=per_channel,
                                                              excluded=excluded, op_types=op_types,
                                                              weight_bits=weight_bits))
        else:
            quantizer = StaticQuantizer(src, Path(tmp), calib_batches, method=method, activation_type=activation_type,
                                        per_channel=per_channel, op_types=op_types, weight_bits=weight_bits,
                                        progress=say)

            def build(nodes: list[str]) -> onnx.ModelProto:
                return load_model(quantizer.build(nodes))[0]

            kept = excluded + [t.node for t in traps]
            if op_types is None and is_transformer_like(float_model):
                def measure(types: list[str] | None) -> float:
                    quantizer.op_types = types
                    with model_source(build(kept)) as source:
                        return worst_cosine(reference.compare("OptimEP", session(source)))

                say("measuring every op type quantized on this transformer-like model (attention and LayerNorm)")
                chosen = choose_recipe(float_model, measure, say)
                say(chosen.reason)
                op_types = quantizer.op_types = chosen.op_types
                recipe = chosen.to_dict()
            if goal is None:
                int8_model = build(kept)
            else:
                int8_model, found_fallback = search(goal, build, float_model, quantized_op_types(op_types), reference,
                                                    kept, max_float, say)
                fallback = found_fallback.to_dict()
        say(f"measuring accuracy on {len(eval_batches)} held-out batch(es)")
        with model_source(int8_model) as source:
            runtimes = {"OptimEP": session(source)}
            if compare_cpu:
                runtimes["CPU EP"] = cpu_session(source)
        accuracy = [row for runtime, sess in runtimes.items() for row in reference.compare(runtime, sess)]
        where = placement(runtimes["OptimEP"]).to_dict()
        if hint := weight_bits_hint(where.get("isa"), weight_bits, where.get("integer_units", 0)):
            notes.append(hint)
        collapsed = [row for row in accuracy if row.runtime == "OptimEP" and row.collapsed]
        if collapsed and not allow_loss:
            raise CollapseError(_collapse_message(collapsed[0]))
        notes += [f"kept despite --allow-loss: {_collapse_message(row)}" for row in collapsed]
        save_model(int8_model, output, external=external)
    return QuantizeResult(
        path=str(output), mode="dynamic" if dynamic else "static", method=None if dynamic else method,
        activation_type=None if dynamic else activation_type, calibration_batches=len(calib_batches),
        evaluation_batches=len(eval_batches), random_calibration=bool(calibration_random and not dynamic and calibration is None),
        excluded=excluded, accuracy=accuracy, placement=where, seconds=time.perf_counter() - t0, warnings=notes,
        op_types=op_types, fallback=fallback, opset_converted_from=converted_from, weight_bits=weight_bits,
        kept_float_ranges=[{"node": t.node, "reason": t.reason} for t in traps], recipe=recipe)
