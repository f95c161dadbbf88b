"""Facts about this machine that reports print and benchmarks record: the CPU's model name, the
instruction-set flags that decide OptimEP's kernels, and the core count.

Linux's /proc/cpuinfo is read once per process; elsewhere (or where it cannot be read) the model is
Python's platform.processor() and no flag is set.
"""

from __future__ import annotations

import functools
import os
import platform

# The /proc/cpuinfo flags that matter to OptimEP's kernels (and to the benchmarks' peak loops), in the
# order reports list them: AVX2 + FMA (the float and int16-pair kernels), AVX-512 (float kernels),
# AVX-512 VNNI and AVX-VNNI (u8 x s8 dot products), AMX (int8 tiles).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")


def parse_cpuinfo(text: str) -> tuple[str | None, frozenset[str], str | None]:
    """(model name, flags, "family F model M") of the first processor block of /proc/cpuinfo's `text`. The family
    and model tell CPUs apart that a VM names alike ("AMD EPYC" is Zen 1 as family 23 model 1, Zen 3 as family 25
    model 1)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the end of the first processor's block
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    family, model = fields.get("cpu family"), fields.get("model")
    cpuid = f"family {family} model {model}" if family and model else None
    return fields.get("model name"), frozenset(fields.get("flags", "").split()), cpuid


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str | None, frozenset[str], str | None]:
    """parse_cpuinfo of this machine; (None, empty, None) where /proc/cpuinfo cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return parse_cpuinfo(f.read())
    except OSError:
        return None, frozenset(), None


def cpu_model() -> str:
    """The CPU's model name, e.g. "Intel(R) Xeon(R) Platinum 8480+"."""
    return _cpuinfo()[0] or platform.processor() or "unknown"


def cpu_id() -> str | None:
    """The CPU's "family F model M" from cpuid (None where unknown)."""
    return _cpuinfo()[2]


def cpu_flags() -> dict[str, bool]:
    """Each of ISA_FLAGS -> whether this CPU has it (False where unknown)."""
    flags = _cpuinfo()[1]
    return {name: name in flags for name in ISA_FLAGS}


def isa_flags() -> list[str]:
    """The ISA_FLAGS this CPU has, in ISA_FLAGS' order."""
    return [name for name, present in cpu_flags().items() if present]


def cpu_summary() -> str:
    """The model, its cpuid family and model and its ISA flags, e.g. "AMD EPYC, family 25 model 1 (avx2, fma)"."""
    cpuid = f", {cpu_id()}" if cpu_id() else ""
    return f"{cpu_model()}{cpuid} ({', '.join(isa_flags())})"


def core_count() -> int | None:
    """Logical CPUs of the machine (os.cpu_count()); None where unknown."""
    return os.cpu_count()
