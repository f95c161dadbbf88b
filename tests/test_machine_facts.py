"""The machine facts benchmarks print beside every figure: /proc/cpuinfo's first processor block gives the model,
the ISA flags and the cpuid family and model (which tell apart the CPUs a VM names alike, "AMD EPYC")."""

from __future__ import annotations

from optim.common.machine import parse_cpuinfo

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx2 fma

processor\t: 1
cpu family\t: 99
model\t\t: 7
model name\t: other
flags\t\t: avx512f
"""


def test_first_block_gives_model_flags_and_cpuid():
    model, flags, cpuid = parse_cpuinfo(ZEN3)
    assert model == "AMD EPYC"
    assert {"avx2", "fma"} <= flags and "avx512f" not in flags  # the second processor's block is not read
    assert cpuid == "family 25 model 1"


def test_missing_family_gives_no_cpuid():
    model, flags, cpuid = parse_cpuinfo("model name\t: Some CPU\nflags\t: avx2\n")
    assert (model, cpuid) == ("Some CPU", None) and flags == frozenset({"avx2"})
    assert parse_cpuinfo("") == (None, frozenset(), None)
