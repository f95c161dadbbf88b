"""Health check of the installation: ONNX Runtime, the OptimEP library, the CPU and the kernels chosen."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from optim.common.machine import cpu_flags, cpu_model

from ..loader import API_VERSION, EP_NAME, EpLoadError, register


def _probe_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "doctor_probe", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


@contextlib.contextmanager
def _native_log_quiet():
    """File descriptor 2 to /dev/null: a probe OptimEP refuses (an ISA or bf16 the CPU lacks) makes ONNX Runtime's
    native logger print an error on its way to the refusal, and the refusal is the answer, not a problem."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def isa_supported(isa: str) -> bool:
    """Whether OptimEP can run with its kernels forced to `isa` on this machine (it refuses otherwise)."""
    from ..sessions import session

    try:
        with _native_log_quiet():
            session(_probe_model(), fallback=False, isa=isa)
    except Exception:
        return False
    return True


def bf16_kernel(isa: str = "auto") -> str | None:
    """The bf16 GEMM OptimEP runs with precision=bf16 and kernels `isa` (its name), or None where it refuses."""
    from ..sessions import session

    try:
        with _native_log_quiet():
            sess = session(_probe_model(), fallback=False, isa=isa, precision="bf16")
    except Exception:
        return None
    return next((k for k in sess._optim_report.get("kernels", []) if k.startswith("sgemm_bf16")), None)


def diagnose(isa: str = "auto") -> dict:
    """Loads OptimEP and runs a one-node model on it; returns what was found. 'ok' is False with 'error' set on failure."""
    from ..sessions import session  # late: sessions imports loader, which doctor may report broken

    report: dict = {
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "ep_name": EP_NAME,
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "library": None,
        "registered": False,
        "api_version": None,
        "isa": None,
        "kernels": [],
        "kernel_rows": [],
        "bf16": None,  # the bf16 GEMM precision=bf16 runs (None: not on this CPU)
        "ops": [],
        "ok": False,
        "error": None,
    }
    try:
        report["library"] = str(register())
        report["registered"] = True
        report["api_version"] = API_VERSION
        sess = session(_probe_model(), fallback=False, isa=isa)
        x = np.array([[-1.0, 0.0, 2.0, -3.5]], dtype=np.float32)
        (y,) = sess.run(None, {"x": x})
        if not np.array_equal(y, np.maximum(x, 0)):
            raise EpLoadError(f"{EP_NAME} computed a wrong Relu: {y.tolist()}")
        report["isa"] = sess._optim_report.get("isa")
        report["kernels"] = sess._optim_report.get("kernels", [])
        report["kernel_rows"] = sess._optim_report.get("kernel_rows", [])
        report["ops"] = sess._optim_report.get("ops", [])
        report["bf16"] = bf16_kernel(isa)
        report["ok"] = True
    except Exception as e:  # report any failure as data: doctor exists to explain them
        report["error"] = str(e)
    return report
