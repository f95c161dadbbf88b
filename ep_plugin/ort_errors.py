"""ONNX Runtime's error messages cut down to the sentence a user needs."""

from __future__ import annotations


def ort_error_message(e: Exception) -> str:
    """The useful sentence of an ONNX Runtime error: without the "[ONNXRuntimeError] : 2 : CODE :"
    prefix and, for a failing node, without ORT's "Non-zero status code ... Status Message:" wrapper
    (OptimEP's own message already names the node, op, dtypes and shapes)."""
    text = str(e).strip()
    if text.startswith("[ONNXRuntimeError]"):
        text = text.split(" : ", 3)[-1]
    text = text.split("Status Message: ", 1)[-1]
    if text.startswith("OptimEP: fused node"):  # the fused node's generated name tells a user nothing
        text = "OptimEP: " + text.split("': ", 1)[-1]
    return text.splitlines()[0] if text else type(e).__name__

