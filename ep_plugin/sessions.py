"""Opening ONNX Runtime sessions on OptimEP (with ORT's CPU EP for what it leaves) or on the CPU EP alone."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Union

import onnx
import onnxruntime as ort

from .loader import EP_NAME, ep_devices, register

ModelLike = Union[str, os.PathLike, bytes, onnx.ModelProto]

# OptimEP's kernel sets (its `isa` option), worst first: each adds to the one before (kernel_table.h). avxvnni and
# avx512vnni run int8 on VNNI dot products; avx2 (and avx512, whose additions are the float kernels) runs 7-bit
# weights on u8 x s8 pairs, 8-bit ones on int16 pairs.
ISAS = ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "amx")

# Options OptimEP understands (passed as EP options; ORT stores them as `ep.optimep.<key>`).
EP_OPTIONS = {
    "isa": f"kernel instruction set: auto (best this CPU runs), {', '.join(ISAS[:-1])} or {ISAS[-1]}",
    "min_partition_nodes": "connected groups smaller than this stay on the CPU EP (default 1)",
    "log": "1 logs each node OptimEP refuses, with the reason, on ORT's logger",
    "placement_report": "path of a JSON file listing claimed groups and refused nodes (set by session())",
    "profile": "path of a JSON file of per-step times inside OptimEP's fused nodes, written when the session is "
               "released (see optim.ep_plugin.tools.profile)",
    "profile_warmup": "with profile: each fused node's first N runs are not counted (default 0)",
    "channels_last": "1 (default) runs convolutions and the ops around them on NHWC tensors inside each partition; "
                     "0 keeps ONNX's NCHW layout (the direct NCHW kernels), for comparison",
    "winograd": "1 (default) runs float 3x3 stride-1 convolutions of up to 1024 channels (channels last) as Winograd "
                "F(2x2, 3x3): 2.25x fewer multiply-adds, results within float tolerance of direct; and int8 ones of 8 "
                "to 1024 input channels on kernel sets without VNNI (AVX2, AVX-512 without VNNI), on int16 pairs, "
                "exactly (the bytes of direct; weights whose int32 sums could overflow stay direct); 0 keeps them direct",
    "precision": "fp32 (default), or bf16: float MatMul / Gemm with constant weights run with their inputs rounded to "
                 "bfloat16 and float32 sums (twice the FMA rate on CPUs with AVX512-BF16; needs one, or isa=scalar)",
}
PRECISIONS = ("fp32", "bf16")

_OPTIMIZATION = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def _model_arg(model: ModelLike):
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    return model


def _session_options(threads: int | None, optimization: str, config: dict[str, str] | None = None) -> ort.SessionOptions:
    if optimization not in _OPTIMIZATION:
        raise ValueError(f"optimization must be one of {', '.join(_OPTIMIZATION)}, got {optimization!r}")
    so = ort.SessionOptions()
    so.log_severity_level = 3  # errors only: placement is reported by placement(), not ORT's warnings
    so.graph_optimization_level = _OPTIMIZATION[optimization]
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        so.intra_op_num_threads = threads
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, str(value))
    return so


def session(
    model: ModelLike,
    *,
    fallback: bool = True,
    threads: int | None = None,
    optimization: str = "basic",
    config: dict[str, str] | None = None,
    ort_profile_prefix: str | None = None,
    **ep_options: str,
) -> ort.InferenceSession:
    """An InferenceSession that runs what OptimEP claims on OptimEP and the rest on ORT's CPU EP.

    fallback=False makes session creation fail when any node would be left to the CPU EP.
    optimization is ORT's graph optimization level before partitioning: 'basic' (default) keeps
    the graph close to the file; 'all' adds ORT's CPU-specific fusions, which OptimEP does not run.
    config: extra ONNX Runtime session config entries (e.g. {"session.intra_op.allow_spinning": "0"}).
    ort_profile_prefix: turns on ONNX Runtime's own profiler; its trace goes to PREFIX_<date>.json and
    sess.end_profiling() returns the path.
    ep_options: see EP_OPTIONS; values are strings (ints are converted); None leaves an option unset.
    """
    register()
    unknown = sorted(set(ep_options) - set(EP_OPTIONS))
    if unknown:
        raise ValueError(f"unknown OptimEP option(s) {', '.join(unknown)}; known: {', '.join(EP_OPTIONS)}")
    options = {k: str(v) for k, v in ep_options.items() if v is not None}
    report = options.get("placement_report")
    own_report = report is None
    if own_report:
        fd, report = tempfile.mkstemp(prefix="optim-placement-", suffix=".json")
        os.close(fd)
        os.unlink(report)  # the EP creates it; absent means OptimEP saw no graph
        options["placement_report"] = report
    so = _session_options(threads, optimization, config)
    if ort_profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = ort_profile_prefix
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if not fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(ep_devices(), options)
    try:
        captured = io.StringIO()
        try:
            # When an EP cannot be created, onnxruntime's Python layer prints the error and silently
            # retries on the CPU EP alone: catch the print and turn it into an error instead.
            with contextlib.redirect_stdout(captured), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Specified 'providers'")  # part of that retry
                sess = ort.InferenceSession(_model_arg(model), sess_options=so)
        except Exception as e:
            refused = [r for g in _read_report(report)["graphs"] for r in g.get("refused", [])]
            if not fallback and refused and "fallback" in str(e).lower():
                # ORT's message names no node: name them, with OptimEP's reasons.
                listed = "; ".join(f"{r['op']} '{r['node']}': {r['reason']}" for r in refused[:10])
                more = f" (and {len(refused) - 10} more)" if len(refused) > 10 else ""
                raise UnclaimedNodesError(
                    f"{len(refused)} node(s) cannot run on {EP_NAME} and CPU fallback is disabled: {listed}{more}"
                ) from None
            raise
        if EP_NAME not in sess.get_providers():
            found = re.search(rf"{EP_NAME}: [^\n]*", captured.getvalue())
            raise OptimEPError(found.group(0) if found else f"{EP_NAME} could not be created: {captured.getvalue().strip()}")
        # OptimEP wrote its report during partitioning, inside the constructor: keep it on the session.
        sess._optim_report = _read_report(report)
    finally:
        if own_report:
            Path(report).unlink(missing_ok=True)
    return sess


class OptimEPError(RuntimeError):
    """OptimEP could not be created for a session (for example an EP option with a bad value)."""


class UnclaimedNodesError(RuntimeError):
    """session(fallback=False) was asked for a model with nodes OptimEP does not run."""


def _read_report(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {"graphs": []}


def cpu_session(model: ModelLike, *, threads: int | None = None, optimization: str = "all",
                config: dict[str, str] | None = None) -> ort.InferenceSession:
    """An InferenceSession on ONNX Runtime's CPU EP alone (the reference OptimEP is compared with).
    optimization: 'all' (ORT's default), 'extended', 'basic' or 'disable'."""
    so = _session_options(threads, optimization, config)
    return ort.InferenceSession(_model_arg(model), sess_options=so, providers=["CPUExecutionProvider"])
