"""A real data set end to end: a small CNN trained on scikit-learn's bundled digits (8x8 images, offline),
exported, quantized with `optim quantize` on training images, and evaluated on the held-out test
images with the int8 model running on OptimEP: it must lose at most 0.5 points of accuracy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from optim.cli import main
from optim.ep_plugin import cpu_session, placement, session

torch = pytest.importorskip("torch")
MAX_ACCURACY_DROP = 0.005  # the bound: half a point of test accuracy
CALIBRATION_BATCHES = 24  # of 32 training images
METHOD = "minmax"


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    from sklearn.datasets import load_digits
    from torch import nn

    d = tmp_path_factory.mktemp("digits")
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]  # [N, 1, 8, 8]
    y = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[:1500], order[1500:]

    # The network lives in a module file, the way a user's training code would define it; the
    # trained weights go through a state_dict file (`optim export SPEC --weights`).
    (d / "digits_net.py").write_text(
        "from torch import nn\n"
        "class DigitsNet(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),\n"
        "                                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())\n"
        "        self.head = nn.Linear(32 * 4 * 4, 10)\n"
        "    def forward(self, x):\n"
        "        return self.head(self.features(x))\n"
        "def build():\n"
        "    return DigitsNet()\n")
    import sys

    sys.path.insert(0, str(d))
    try:
        import digits_net

        torch.manual_seed(0)
        torch.set_num_threads(1)  # the same float sums, so the same trained weights, on every machine
        net = digits_net.build()
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
        for _ in range(12):
            for i in range(0, len(train), 64):
                opt.zero_grad()
                nn.functional.cross_entropy(net(xt[i:i + 64]), yt[i:i + 64]).backward()
                opt.step()
        torch.save(net.state_dict(), d / "digits.pt")
        from optim.exporter import export

        path = d / "digits.onnx"
        export("digits_net:build", path, inputs=["x:batchx1x8x8"], weights=d / "digits.pt")
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
