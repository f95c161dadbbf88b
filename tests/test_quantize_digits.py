"""A real data set end to end: a small CNN trained on scikit-learn's bundled digits (8x8 images, offline),
exported, quantized with `optim quantize` on training images, and evaluated on the held-out test
images with the int8 model running on OptimEP: it must lose at most 0.5 points of accuracy."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from digits_helpers import trained_digits
from optim.cli import main
from optim.ep_plugin import cpu_session, placement, session

torch = pytest.importorskip("torch")
MAX_ACCURACY_DROP = 0.005  # the bound: half a point of test accuracy
CALIBRATION_BATCHES = 24  # of 32 training images
METHOD = "minmax"


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    d = tmp_path_factory.mktemp("digits")
    net = trained_digits(d)
    x, y, train, test = net.x, net.y, net.train, net.test
    from optim.exporter import export

    path = d / "digits.onnx"
    sys.path.insert(0, str(d))
    try:
        export("digits_net:build", path, inputs=["x:batchx1x8x8"], weights=net.weights)
    finally:
        sys.path.remove(str(d))
    calib = d / "calib"
    calib.mkdir()
    for i in range(CALIBRATION_BATCHES):  # training images only
        np.savez(calib / f"{i:02d}.npz", x=x[train[i * 32:(i + 1) * 32]])
    evaluation = d / "eval"
    evaluation.mkdir()
    np.savez(evaluation / "test.npz", x=x[test])
    return path, calib, evaluation, x[test], y[test]


def test_int8_digits_cnn_loses_at_most_half_a_point(digits, tmp_path):
    model, calib, evaluation, x_test, y_test = digits
    out = tmp_path / "digits.int8.onnx"
    r = CliRunner().invoke(main, ["quantize", str(model), "-o", str(out), "--calib", str(calib), "--eval", str(evaluation),
                                  "--logits", "output", "--method", METHOD, "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    fp32 = np.argmax(cpu_session(str(model)).run(None, {"x": x_test})[0], axis=1)
    int8_sess = session(str(out))
    assert placement(int8_sess).integer_units >= 3  # two convs and the linear layer
    int8 = np.argmax(int8_sess.run(None, {"x": x_test})[0], axis=1)
    acc_fp32, acc_int8 = float(np.mean(fp32 == y_test)), float(np.mean(int8 == y_test))
    print(f"digits test accuracy: fp32 {acc_fp32:.2%}, int8 on OptimEP {acc_int8:.2%}; "
          f"top-1 agreement {report['accuracy'][0]['top1']:.2%}")
    assert acc_fp32 > 0.95, "the float model did not train"
    assert acc_fp32 - acc_int8 <= MAX_ACCURACY_DROP, (acc_fp32, acc_int8)
