"""`make test-asan` runs tests/ep against the ASan/UBSan build of OptimEP: prove that it really does
(a misconfigured LD_PRELOAD or library path would otherwise pass silently on the normal build)."""

from __future__ import annotations

import os

import pytest

from optim.ep_plugin import library_path, register

pytestmark = pytest.mark.skipif(os.environ.get("OPTIM_EXPECT_SANITIZED") != "1",
                                reason="only in `make test-asan` (OPTIM_EXPECT_SANITIZED=1)")


def test_the_sanitizer_build_is_the_library_loaded():
    register()
    expected = os.environ["OPTIM_EP_LIBRARY"]
    assert os.path.samefile(library_path(), expected)
    maps = open("/proc/self/maps", encoding="utf-8").read()
    assert "libasan" in maps and "libubsan" in maps, "the sanitizer runtimes are not preloaded"
    assert os.path.realpath(expected) in maps, "OptimEP's sanitizer build is not mapped into this process"
    with open(expected, "rb") as f:
        assert b"__asan_report" in f.read(), "the library is not instrumented by AddressSanitizer"
