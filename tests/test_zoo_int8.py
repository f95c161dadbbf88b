"""The zoo quantized to int8 QDQ (onnxruntime.quantization, until `optim quantize` exists): OptimEP
runs at least 95% of each file's nodes, turns every MatMul/Gemm/Conv unit into integer compute, and
stays as close to the fp32 model as ONNX Runtime's exact reference (optimizations disabled) does."""

from __future__ import annotations

import numpy as np
import pytest

from optim.ep_plugin import cpu_session, placement, session
from optim.models import ZOO, example_inputs

MIN_ON_OPTIMEP = 0.95
# OptimEP's distance to fp32 may exceed the reference's by this fraction of the reference's own distance
# (integer sums are exact; only ties in the requantization rounding can differ).
ACCURACY_SLACK = 0.02


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from optim.exporter import export

    out = tmp_path_factory.mktemp("int8")
    files = {}
    for name in ZOO:
        fp32 = export(name, out / f"{name}.onnx").path

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.feeds = iter([example_inputs(name, seed=s) for s in range(100, 108)])

            def get_next(self):
                return next(self.feeds, None)

        int8 = out / f"{name}.int8.onnx"
        quantize_static(str(fp32), str(int8), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
        files[name] = (str(fp32), str(int8))
    return files


# cnn: 6 Conv, 1 Gemm, 2 residual Add; transformer: 6 weight MatMul/Gemm, 9 Add (residuals,
# positions, GELU's 1 + erf) and its 2 activation x activation MatMuls (attention).
EXPECTED_INTEGER_UNITS = {"mlp": 3, "cnn": 9, "transformer": 17}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_int8_zoo_runs_on_optimep_as_integer_units(quantized, name):
    _, int8 = quantized[name]
    p = placement(session(int8))
    assert p.optim_nodes / p.total_nodes >= MIN_ON_OPTIMEP, p.summary()
    assert p.integer_units == EXPECTED_INTEGER_UNITS[name], (p.compiled, p.float_units)
    assert p.float_units == [], p.float_units


@pytest.mark.parametrize("name", sorted(ZOO))
def test_int8_zoo_is_as_accurate_as_the_exact_reference(quantized, name):
    fp32, int8 = quantized[name]
    feeds = example_inputs(name, seed=7)
    ref = cpu_session(fp32).run(None, feeds)[0].astype(np.float64)
    exact = cpu_session(int8, optimization="disable").run(None, feeds)[0]
    ours = session(int8).run(None, feeds)[0]
    err_ref = np.linalg.norm(exact - ref) / np.linalg.norm(ref)
    err_ours = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
    assert err_ours <= err_ref * (1 + ACCURACY_SLACK) + 1e-6, (err_ours, err_ref)
