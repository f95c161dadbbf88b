"""Export, optimize and quantize one suite model with the project's own pipeline, cached on disk.

    optim.exporter.export -> model.onnx -> optim.optimizer.optimize -> model.opt.onnx
                          -> optim.optimizer.quantization.quantize -> model.int8.onnx

Files live in CACHE/<model>-<key>/, where the key hashes everything that decides them: the model's
registry entry and quantization recipe, the package versions (torch, transformers, onnx, ...) and
the source of optim's models, exporter and optimizer. A rerun with the same key skips the stages
already done; a change to any of those makes a new folder. A failed stage is not cached (a rerun
tries it again); the model's folders of other keys are removed (a BERT-base folder holds about
1 GB). When optimizing fails the unoptimized export is timed instead; when quantizing
fails there is no int8 model; both failures are recorded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

import optim
from optim.common.staging import staged_output
from optim.models import get
from realsize_models import BY_NAME, SEQUENCE, model_inputs

CALIBRATION_BATCHES = 10  # of one sample each; quantize() keeps the last 20% out to measure accuracy
CALIBRATION_SEED = 1000  # timing inputs use seed 0: calibration never sees them
PROOF_BATCH = 2  # the optimizer's proof runs at this batch (not 1, so a batch-1 shortcut would show)
_PACKAGES = ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "onnxsim", "numpy")
_SOURCES = ("models", "exporter", "optimizer")  # optim's subpackages that shape the files


class PrepareError(RuntimeError):
    """A stage without which nothing can be timed (the export) failed."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message


@dataclass
class Prepared:
    folder: Path
    fp32: Path  # the optimized model, or the raw export when optimizing failed
    int8: Path | None
    stages: dict[str, dict] = field(default_factory=dict)  # per stage: seconds, cached, details
    failures: list[dict] = field(default_factory=list)  # {"stage", "error"}


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def cache_key(name: str) -> dict:
    """Everything the cached files depend on, as JSON-able data (its hash names the folder)."""
    entry = get(name)
    root = Path(optim.__file__).parent
    sources = hashlib.sha256()
    for sub in _SOURCES:
        for path in sorted((root / sub).rglob("*.py")):
            sources.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return {"model": name, "inputs": [list(map(str, i)) for i in entry.inputs], "dynamic": repr(entry.dynamic),
            "sequence": SEQUENCE if name == "minilm" else None, "op_types": BY_NAME[name].op_types,
            "exporter": BY_NAME[name].exporter,
            "calibration": [CALIBRATION_BATCHES, CALIBRATION_SEED], "proof_batch": PROOF_BATCH,
            "packages": {p: _version(p) for p in _PACKAGES}, "optim_sources": sources.hexdigest()}


def model_folder(cache: Path, name: str) -> Path:
    key = json.dumps(cache_key(name), sort_keys=True)
    return cache / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


class _State:
    """prepared.json in the model's folder: the stages done, with what they reported."""

    def __init__(self, folder: Path, name: str):
        self.path = folder / "prepared.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {"key": cache_key(name), "stages": {}}

    def done(self, stage: str, output: Path) -> dict | None:
        info = self.data["stages"].get(stage)
        return dict(info, cached=True) if info is not None and output.exists() else None

    def record(self, stage: str, info: dict) -> dict:
        self.data["stages"][stage] = info
        with staged_output(self.path) as tmp:
            tmp.write_text(json.dumps(self.data, indent=2))
        return dict(info, cached=False)


def _export(name: str, out: Path, say) -> dict:
    from optim.exporter import export  # torch only here

    result = export(name, out, exporter=BY_NAME[name].exporter, progress=lambda line: say(f"export: {line}"))
    return {"exporter": result.exporter, "opset": result.opset}


def _optimize(name: str, src: Path, out: Path) -> dict:
    from optim.optimizer import optimize

    result = optimize(src, out, inputs=model_inputs(name, PROOF_BATCH, seed=CALIBRATION_SEED - 1))
    return {"ops_after": result.ops_after, "nodes_before": sum(result.ops_before.values()),
            "nodes_after": sum(result.ops_after.values()), "simplify": result.simplify.status}


def _quantize(name: str, src: Path, out: Path, calib: Path, weight_bits: int, say) -> dict:
    from optim.optimizer.quantization import quantize

    calib.mkdir(exist_ok=True)
    for i in range(CALIBRATION_BATCHES):
        np.savez(calib / f"{i:02d}.npz", **model_inputs(name, 1, seed=CALIBRATION_SEED + i))
    op_types = BY_NAME[name].op_types
    result = quantize(src, out, calibration=str(calib), op_types=list(op_types) if op_types else None,
                      weight_bits=weight_bits, progress=lambda line: say(f"quantize: {line}"))
    return {"op_types": result.op_types, "weight_bits": weight_bits, "calibration_batches": result.calibration_batches,
            "evaluation_batches": result.evaluation_batches, "accuracy": [a.to_dict() for a in result.accuracy]}


def _stage(state: _State, stage: str, output: Path, work, say) -> dict:
    cached = state.done(stage, output)
    if cached is not None:
        say(f"{stage}: cached ({output.name})")
        return cached
    say(f"{stage}: running")
    t0 = time.perf_counter()
    info = work()
    info["seconds"] = round(time.perf_counter() - t0, 1)
    say(f"{stage}: done in {info['seconds']:.0f} s")
    return state.record(stage, info)


def int8_stage(weight_bits: int) -> tuple[str, str]:
    """(stage name, file name) of the int8 model with weights of `weight_bits` bits."""
    return ("quantize", "model.int8.onnx") if weight_bits == 8 else (f"quantize-w{weight_bits}", f"model.int8-w{weight_bits}.onnx")


def prepare(name: str, cache: Path, say=print, rebuild: bool = False, with_int8: bool = True,
            weight_bits: int = 8) -> Prepared:
    """The model's fp32 (optimized) and int8 files, from the cache or made now; see the module doc.
    with_int8=False stops after optimizing (Prepared.int8 is None; benchmarks/serve.py times fp32 only).
    weight_bits: the int8 model's weights, 8 or 7 bits (`optim quantize --weight-bits`); each has its own file."""
    folder = model_folder(cache, name)
    for stale in cache.glob(f"{name}-*"):
        if stale != folder and stale.is_dir():
            shutil.rmtree(stale)
    folder.mkdir(parents=True, exist_ok=True)
    if rebuild:
        (folder / "prepared.json").unlink(missing_ok=True)
    state = _State(folder, name)
    quantize_stage, int8_name = int8_stage(weight_bits)
    raw, opt, int8 = folder / "model.onnx", folder / "model.opt.onnx", folder / int8_name
    prepared = Prepared(folder, opt, None)
    try:
        prepared.stages["export"] = _stage(state, "export", raw, lambda: _export(name, raw, say), say)
    except Exception as e:  # noqa: BLE001 - any failure is reported with the model's name and stage
        raise PrepareError("export", f"{type(e).__name__}: {e}") from None
    try:
        prepared.stages["optimize"] = _stage(state, "optimize", opt, lambda: _optimize(name, raw, opt), say)
    except Exception as e:  # noqa: BLE001
        prepared.failures.append({"stage": "optimize", "error": f"{type(e).__name__}: {e}"})
        say(f"optimize FAILED ({type(e).__name__}: {e}); timing the unoptimized export instead")
        prepared.fp32 = raw
    if not with_int8:
        return prepared
    try:
        prepared.stages["quantize"] = _stage(state, quantize_stage, int8,
                                             lambda: _quantize(name, prepared.fp32, int8, folder / "calib", weight_bits, say),
                                             say)
        prepared.int8 = int8
    except Exception as e:  # noqa: BLE001
        prepared.failures.append({"stage": quantize_stage, "error": f"{type(e).__name__}: {e}"})
        say(f"quantize FAILED ({type(e).__name__}: {e}); no int8 timings")
    return prepared
