"""examples/serve_threads.py: one OptimEP session called from many threads, results equal to runs alone."""

from __future__ import annotations

import sys

from embed_helpers import ROOT, run_checked


def test_serve_threads_example():
    done = run_checked([sys.executable, ROOT / "examples" / "serve_threads.py", "--threads", "3", "--requests", "60"])
    assert "60 requests from 3 threads on one session" in done.stdout
    assert "results equal to runs alone" in done.stdout


def test_api_reference_is_up_to_date():
    run_checked([sys.executable, ROOT / "docs" / "api_reference.py", "--check"])
