"""PyTorch artifact -> ONNX, verified against PyTorch on ONNX Runtime's CPU EP (needs torch).

    from optim.exporter import export
    result = export("cnn", "cnn.onnx")                       # a zoo model
    result = export("model.pt2", "model.onnx")               # torch.export archive
    result = export("mypkg.nets:build", "m.onnx", inputs=["x:batchx3x224x224"], weights="w.pt")
    print(result.exporter, result.report)

Every user mistake raises ExportError (a ValueError) with one sentence saying what and how to fix;
an export that does not match PyTorch raises VerificationError (an ExportError) and writes no file.
"""

from optim.common.comparison import FLOAT_ATOL, FLOAT_RTOL, HALF_ATOL, HALF_RTOL

from .detect import detect_kind
from .errors import ExportError, VerificationError
from .pipeline import export
from .result import ExportResult
from .specs import DYNAMIC_EXAMPLE_SIZE, InputSpec, parse_input_spec
from .to_onnx import EXPORTERS

__all__ = [
    "DYNAMIC_EXAMPLE_SIZE",
    "EXPORTERS",
    "FLOAT_ATOL",
    "FLOAT_RTOL",
    "HALF_ATOL",
    "HALF_RTOL",
    "ExportError",
    "ExportResult",
    "InputSpec",
    "VerificationError",
    "detect_kind",
    "export",
    "parse_input_spec",
]
