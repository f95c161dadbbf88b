"""Run by test_leaks.py in a child process under LeakSanitizer: sessions of float and int8 models
created, run (also into errors) and destroyed, so that anything OptimEP forgets to free is reported."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from test_qdq_units import CONV_CASES, _qdq_conv_model  # noqa: E402
from test_reliability import MODELS  # noqa: E402

from optim.ep_plugin import session  # noqa: E402

for name, (model, make) in MODELS.items():
    for i in range(10):
        s = session(model, fallback=False)
        s.run(None, {"x": make(np.random.default_rng(i), 1 + i % 3)})
        del s
conv_model, x, _ = _qdq_conv_model(**CONV_CASES["conv3x3_groups"], seed=1)
for _ in range(3):
    s = session(conv_model, fallback=False)
    s.run(None, {"x": x})
    del s
try:  # an error inside a run must free what the run allocated
    session(MODELS["cnn"][0], fallback=False).run(None, {"x": np.zeros((1, 4, 12, 12), np.float32)})
except Exception:
    pass
try:  # and so must a refused session
    session(MODELS["cnn"][0], fallback=False, isa="no-such-isa")
except Exception:
    pass
print("workload done")
