"""Float ONNX model -> int8 QDQ model, with calibration and an accuracy report measured on OptimEP.

    from optim.optimizer.quantization import quantize
    result = quantize("model.onnx", "model.int8.onnx", calibration="calib/", method="percentile")
    for row in result.accuracy: print(row)
    quantize("model.onnx", "model.int8.onnx", calibration="calib/", target="cosine>=0.995")  # float fallback

The QDQ contract (DESIGN.md): int8 weights, symmetric per output channel; uint8 or int8 activations
per tensor; int32 biases. onnxruntime.quantization does the calibration and QDQ insertion; this
package adds the data handling, the checks, and the report. Needs onnx, onnxruntime, numpy.
"""

from .accuracy import OutputAccuracy, measure_accuracy
from .calibration import CalibrationError, load_calibration, random_calibration
from .fallback import FallbackError, FallbackResult
from .quantize import CollapseError, QuantizeResult, quantize
from .target import Target, parse_target

__all__ = ["CalibrationError", "CollapseError", "FallbackError", "FallbackResult", "OutputAccuracy", "QuantizeResult", "Target",
           "load_calibration", "measure_accuracy", "parse_target", "quantize", "random_calibration"]
