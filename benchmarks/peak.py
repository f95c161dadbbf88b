"""This machine's arithmetic peak on the cores the benchmarks use, measured rather than looked up.

peak_fma.cc (beside this file) is compiled with the system g++ into the benchmarks' cache folder
(once per source version) and runs, for every kernel this CPU's flags allow, a loop of independent
multiply-accumulate instructions on `threads` threads (one per core). The fp32 peak is the best of
the AVX-512 and AVX2 FMA loops (on CPUs that split 512-bit FMAs in two, AVX2 can be as fast); the
int8 peak is the best integer dot product the CPU has (AVX-512 VNNI, AVX-VNNI, else AVX2's u8 x s8 pairs,
the path OptimEP takes without VNNI for 7-bit weights; 8-bit weights take the int16 pairs, s16_avx2).
for_isa() gives the peaks of the kernels one OptimEP kernel set (its `isa` option) can use. Each kernel runs `repeats` short times and keeps
the best: other work on the machine (a compiler on a shared 2-core box) only ever lowers a
measurement, and short runs catch the quiet moments between its bursts.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from optim.common.machine import cpu_flags

SOURCE = Path(__file__).resolve().parent / "peak_fma.cc"
# kernel name in peak_fma.cc -> the /proc/cpuinfo flags it needs
FP32_KERNELS = {"f32_avx512": ("avx512f",), "f32_avx2": ("avx2", "fma")}
INT8_KERNELS = {"u8s8_avx512vnni": ("avx512f", "avx512_vnni"), "u8s8_avxvnni": ("avx2", "avx_vnni"),
                "u8s8_avx2": ("avx2",), "s16_avx2": ("avx2",)}
# OptimEP's kernel set -> the peak kernels it may use (fp32, int8 with 7-bit weights, int8 with 8-bit weights).
_ISA_KERNELS = {"avx2": (("f32_avx2",), ("u8s8_avx2",), ("s16_avx2",)),
                "avxvnni": (("f32_avx2",), ("u8s8_avxvnni",), ("u8s8_avxvnni",)),
                "avx512": (("f32_avx512", "f32_avx2"), ("u8s8_avx2",), ("s16_avx2",))}


class PeakError(RuntimeError):
    """The peak program could not be built or run (no g++, a compiler error, a crash)."""


@dataclass
class Peak:
    threads: int
    fp32_gflops: float
    fp32_kernel: str
    int8_gops: float
    int8_kernel: str
    measured: dict[str, float]  # every kernel run: GFLOP/s or GOP/s

    def describe(self) -> str:
        return (f"measured peak on {self.threads} core(s): fp32 {self.fp32_gflops:.0f} GFLOP/s ({self.fp32_kernel}), "
                f"int8 {self.int8_gops:.0f} GOP/s ({self.int8_kernel})")

    def for_isa(self, isa: str, weight_bits: int = 8) -> "Peak":
        """The peaks OptimEP's kernel set `isa` can reach with int8 weights of `weight_bits` bits (its shares
        are of these); "auto" and the AVX-512 sets: the machine's best, as measured."""
        kernels = _ISA_KERNELS.get(isa)
        if kernels is None:
            return self
        fp32 = [k for k in kernels[0] if k in self.measured]
        int8 = [k for k in kernels[1 if weight_bits == 7 else 2] if k in self.measured]
        if not fp32 or not int8:  # a kernel set this CPU cannot run: OptimEP refuses it, the peaks say nothing
            return self
        f32, i8 = max(fp32, key=self.measured.get), max(int8, key=self.measured.get)
        return Peak(self.threads, self.measured[f32], f32, self.measured[i8], i8, self.measured)


def build(cache: Path) -> Path:
    """The compiled peak program in `cache`, compiled now if this source version has not been."""
    return compile_program(SOURCE, cache, PeakError)


def compile_program(source: Path, cache: Path, error: type[Exception], extra_sources: tuple = (),
                    flags: tuple = ("-O2", "-pthread"), also_hashed: tuple = ()) -> Path:
    """The C++ probe `source` (linked with `extra_sources`, compiled with `flags`) built with the system g++ into
    `cache`, named by its stem and a hash of the flags and every source's text (and of `also_hashed`, the headers it
    includes), so an edited one compiles again; `error` (one sentence) when g++ is missing or fails."""
    texts = [" ".join(flags).encode()] + [Path(p).read_bytes() for p in (source, *extra_sources, *also_hashed)]
    digest = hashlib.sha256(b"".join(texts)).hexdigest()[:12]
    binary = cache / f"{source.stem}-{digest}"
    if binary.exists():
        return binary
    compiler = shutil.which("g++")
    if compiler is None:
        raise error(f"g++ is not on PATH, so {source.name} cannot be compiled")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    done = subprocess.run([compiler, *flags, "-std=c++17", str(source), *map(str, extra_sources), "-o", str(tmp)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise error(f"g++ failed on {source.name}: {done.stderr.strip()[:800]}")
    tmp.replace(binary)
    return binary


def _run(binary: Path, kernel: str, threads: int, seconds: float) -> float:
    done = subprocess.run([str(binary), kernel, str(threads), str(seconds)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PeakError(f"{binary.name} {kernel} exited with {done.returncode}: {done.stderr.strip()}")
    return float(done.stdout.split()[1]) / 1e9


def measure(cache: Path, threads: int, seconds: float = 0.2, repeats: int = 10) -> Peak:
    """Best fp32 and int8 rates over the kernels this CPU runs, `threads` threads at once."""
    flags = cpu_flags()
    binary = build(cache)
    measured = {}
    for kernel, needs in {**FP32_KERNELS, **INT8_KERNELS}.items():
        if all(flags.get(f) for f in needs):
            measured[kernel] = max(_run(binary, kernel, threads, seconds) for _ in range(repeats))
    fp32 = {k: v for k, v in measured.items() if k in FP32_KERNELS}
    int8 = {k: v for k, v in measured.items() if k in INT8_KERNELS}
    if not fp32 or not int8:
        raise PeakError(f"this CPU has none of the AVX2/AVX-512 kernels the peak program measures (flags: {flags})")
    best32, best8 = max(fp32, key=fp32.get), max(int8, key=int8.get)
    return Peak(threads, fp32[best32], best32, int8[best8], best8, measured)
