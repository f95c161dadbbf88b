"""Code the library shares between files of different ISAs stays baseline x86-64.

A template or inline function instantiated by several files (std::vector<float>'s growth, say) is one COMDAT copy
in liboptim_ep.so, and the linker keeps the first object's. If that object was compiled with -mavx512f, every
caller gets AVX-512 code, and a CPU without it faults (SIGILL: seen in the -O1 sanitizer build on an AVX2-only AMD
EPYC, where the AVX-512 files came first in link order). ep_plugin/CMakeLists.txt links the lowest ISA first; this
checks the result on whichever library the tests load (the sanitizer build too, under `make test-asan`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from optim.ep_plugin import library_path

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
# Mangled names of functions in namespace std (demangling the sanitizer build's listing doubles objdump's time).
STD_MANGLED = ("_ZNSt", "_ZNKSt", "_ZSt", "_ZNSa", "_ZNKSa", "_ZNSs", "_ZNKSs")
VECTOR_STATE = re.compile(r"%[yz]mm\d|%k[1-7]\b")  # 256/512-bit registers or AVX-512 mask registers


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
def test_no_standard_library_code_in_the_ep_uses_avx_registers():
    # Without the sanitizer runtimes `make test-asan` preloads: objdump under them takes minutes.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library_path())],
                             capture_output=True, text=True, check=True, env=env).stdout
    offending: dict[str, str] = {}
    function = None
    in_std = False
    for line in listing.splitlines():
        if line.endswith(">:"):  # a function's first line
            found = FUNCTION.match(line)
            function = found.group(1) if found else None
            in_std = bool(function) and function.startswith(STD_MANGLED)
        elif in_std and VECTOR_STATE.search(line):
            offending.setdefault(function, line.strip())
    assert not offending, "standard-library code compiled for an ISA above baseline: " + "; ".join(
        f"{name[:120]}: {insn}" for name, insn in list(offending.items())[:5])
