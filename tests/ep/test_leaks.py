"""LeakSanitizer over a workload of sessions (leak_workload.py), in a child process: CPython and
onnxruntime leave allocations behind at exit by design, so only leaks whose stack passes through
OptimEP's code count. Runs in `make test-asan`, where the library is the sanitizer build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("OPTIM_EXPECT_SANITIZED") != "1",
                                reason="only in `make test-asan` (OPTIM_EXPECT_SANITIZED=1)")
OUR_FRAMES = ("optim::", "liboptim_ep.so", "/ep_plugin/src/", "/ep_plugin/kernels/")


def test_no_leak_passes_through_optimep(tmp_path):
    log = tmp_path / "lsan"
    env = dict(os.environ, ASAN_OPTIONS=f"detect_leaks=1:log_path={log}:abort_on_error=0:exitcode=0")
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("leak_workload.py"))], env=env,
                       capture_output=True, text=True, timeout=600)
    assert "workload done" in p.stdout, p.stdout + p.stderr
    reports = [f.read_text() for f in tmp_path.glob("lsan*")]
    assert reports, "LeakSanitizer wrote no report: it did not run"  # CPython's own exit leaks always show
    ours = [block for text in reports for block in text.split("\n\n") if "leak of" in block and any(f in block for f in OUR_FRAMES)]
    assert not ours, "leaks through OptimEP:\n" + "\n\n".join(ours[:3])
