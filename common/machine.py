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


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str | None, frozenset[str]]:
    """(model name, flags) of the first processor /proc/cpuinfo lists; (None, empty) where it cannot be read."""
    model, flags = None, None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if model is None and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif flags is None and line.startswith("flags"):
                    flags = frozenset(line.split(":", 1)[1].split())
                if model is not None and flags is not None:
                    break
    except OSError:
        pass
    return model, flags or frozenset()


def cpu_model() -> str:
    """The CPU's model name, e.g. "Intel(R) Xeon(R) Platinum 8480+"."""
    return _cpuinfo()[0] or platform.processor() or "unknown"


def cpu_flags() -> dict[str, bool]:
    """Each of ISA_FLAGS -> whether this CPU has it (False where unknown)."""
    flags = _cpuinfo()[1]
    return {name: name in flags for name in ISA_FLAGS}


def isa_flags() -> list[str]:
    """The ISA_FLAGS this CPU has, in ISA_FLAGS' order."""
    return [name for name, present in cpu_flags().items() if present]


def cpu_summary() -> str:
    """The model with its ISA flags, e.g. "Intel(R) Xeon(R) ... (avx2, fma, avx512f, avx512_vnni)"."""
    return f"{cpu_model()} ({', '.join(isa_flags())})"


def core_count() -> int | None:
    """Logical CPUs of the machine (os.cpu_count()); None where unknown."""
    return os.cpu_count()
