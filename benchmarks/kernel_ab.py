"""One of OptimEP's AVX2 kernels alone, one thread, on the shapes real models run it on: a kernel change measured
without a model's other steps, which on a noisy 2-core host drift by more than the change.

    .venv/bin/python benchmarks/kernel_ab.py [--kernel dwconv|conv_gemm_s16|sgemm] [--against OTHER_KERNELS_DIR]
        [--rounds 15] [--runs 100]

  dwconv         dwconv_q8_avx2 on MobileNetV2's depthwise bands (kernel_dwconv.cc): float x - zero in, int16 or
                 bytes out
  conv_gemm_s16  conv_gemm_s16_avx2_6x16 on MobileNetV2's / ResNet-50's 1x1 rows (kernel_conv_gemm_s16.cc): bytes,
                 or the float q - zero a block's depthwise reads
  sgemm          sgemm_f32_avx2_6x16 on MiniLM's / BERT's / ViT's MatMuls (kernel_sgemm.cc), B cycled over copies
                 so that it streams from memory as a model's weights do (1 copy: B in cache)

Compiles the kernel's driver with ep_plugin/kernels' sources (g++ -O3 -mavx2 -mfma, as the library builds them)
into the benchmarks' cache, and prints per shape the best time of --runs calls and GMAC/s, the best over --rounds
rounds. With --against (the kernels folder of another checkout, e.g. `git worktree add /tmp/base HEAD~1`, then
/tmp/base/ep_plugin/kernels), both builds run in alternating rounds and the table gives their ratio (> 1: this
checkout faster). Best-of rounds, because on a shared host a slow spell only ever adds time. Needs an AVX2 CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from peak import compile_program

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "ep_plugin" / "kernels"


def band_macs(shape: tuple) -> int:
    """A 3x3 depthwise band's multiply-adds ("same" padding: (h - 1) // stride + 1 outputs a row)."""
    h, c, s, rows, _ = shape
    return rows * ((h - 1) // s + 1) * c * 9


def gemm_macs(shape: tuple) -> int:
    m, k, n, _ = shape
    return m * k * n


@dataclass(frozen=True)
class Kernel:
    driver: str
    sources: tuple  # in ep_plugin/kernels: the kernel and what its fallbacks link against
    columns: str  # the table's shape columns
    shapes: tuple  # each the driver's arguments before RUNS
    macs: Callable[[tuple], int]  # a shape's multiply-adds


KERNEL_SET = {
    # (input width = height, channels, stride, output rows per band, output) of MobileNetV2's depthwise units.
    "dwconv": Kernel("kernel_dwconv.cc",
                     ("dwconv_avx2.cc", "dwconv_scalar.cc", "activation_scalar.cc", "math_f32_scalar.cc",
                      "eltwise_f32_scalar.cc"),
                     "| input | channels | stride | rows | out |",
                     ((112, 32, 1, 2, "uint8"), (112, 96, 2, 1, "int16"), (56, 144, 1, 2, "int16"),
                      (56, 144, 2, 1, "int16"), (28, 192, 1, 4, "int16"), (14, 576, 1, 8, "int16"),
                      (7, 960, 1, 7, "int16")), band_macs),
    # (rows, K, N, output) of MobileNetV2's and ResNet-50's 1x1 units: a block's expansions per band (224 and 1344
    # rows, float q - zero out), then whole units.
    "conv_gemm_s16": Kernel("kernel_conv_gemm_s16.cc", ("conv_gemm_s16_avx2.cc",), "| rows | K | N | out |",
                            ((224, 16, 96, "centered_float"), (1344, 16, 96, "centered_float"),
                             (3136, 24, 144, "centered_float"), (3136, 24, 144, "uint8"), (3136, 32, 16, "uint8"),
                             (3136, 144, 24, "uint8"), (3136, 64, 256, "uint8"), (784, 128, 512, "uint8")),
                            gemm_macs),
    # (M, K, N, copies of packed B) of MiniLM's (hidden 384) and BERT-base's / ViT-B's (768) MatMuls at sequence 128
    # (197 tokens for ViT), batch 1, then MiniLM's FFN at batch 8 and one with B in cache.
    "sgemm": Kernel("kernel_sgemm.cc", ("sgemm_f32_avx2.cc", "sgemm_pack.cc"), "| M | K | N | copies |",
                    ((128, 384, 384, 16), (128, 384, 1536, 16), (128, 1536, 384, 16), (128, 768, 3072, 4),
                     (197, 768, 2304, 4), (1024, 384, 1536, 4), (128, 384, 1536, 1)),
                    gemm_macs),
}


class KernelBuildError(RuntimeError):
    """A driver could not be compiled (no g++, or a compiler error)."""


def build(kernel: Kernel, kernels: Path, cache: Path, optimize: str = "-O3") -> Path:
    """The driver linked with `kernels`' sources (peak.compile_program: compiled now unless this exact text and these
    flags were before); `optimize` is the library's -O3 for timings (the tests build at -O0 to check it runs)."""
    return compile_program(HERE / kernel.driver, cache, KernelBuildError,
                           extra_sources=tuple(kernels / s for s in kernel.sources),
                           flags=(optimize, "-mavx2", "-mfma", f"-I{kernels}"),
                           also_hashed=(HERE / "kernel_driver.h", *sorted(kernels.glob("*.h"))))


def run_shape(binary: Path, shape: tuple, runs: int) -> float:
    """Best microseconds of `runs` calls."""
    done = subprocess.run([str(binary), *map(str, shape), str(runs)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{binary.name} {shape} exited with {done.returncode}: {done.stderr.strip()}")
    return float(done.stdout.split()[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", choices=sorted(KERNEL_SET), default="dwconv", help="which kernel (default dwconv)")
    ap.add_argument("--against", type=Path, help="another checkout's ep_plugin/kernels folder, run in alternate rounds")
    ap.add_argument("--rounds", type=int, default=15, help="rounds; each shape's best over them (default 15)")
    ap.add_argument("--runs", type=int, default=100, help="kernel calls per round and shape (default 100)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.runs < 1:
        ap.error("--rounds and --runs are at least 1")
    if "avx2" not in Path("/proc/cpuinfo").read_text():
        sys.exit("this CPU has no AVX2: the kernels cannot run here")
    kernel = KERNEL_SET[args.kernel]
    cache = HERE / ".cache"
    if args.against and not (args.against / kernel.sources[0]).exists():
        sys.exit(f"{args.against} holds no {kernel.sources[0]}: pass a checkout's ep_plugin/kernels folder")
    try:
        sides = {"this": build(kernel, KERNELS, cache)}
        if args.against:
            sides["against"] = build(kernel, args.against.resolve(), cache)
    except KernelBuildError as e:
        sys.exit(str(e))
    best = {name: {shape: float("inf") for shape in kernel.shapes} for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for shape in kernel.shapes:
            for name in order:
                best[name][shape] = min(best[name][shape], run_shape(sides[name], shape, args.runs))
    from optim.common.machine import cpu_summary

    print(f"{args.kernel} on {cpu_summary()}; 1 thread, best of {args.rounds} rounds x {args.runs} calls")
    head = kernel.columns + " us | GMAC/s |" + (" against us | ratio |" if args.against else "")
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for shape in kernel.shapes:
        us = best["this"][shape]
        line = "| " + " | ".join(map(str, shape)) + f" | {us:.2f} | {kernel.macs(shape) / us / 1e3:.1f} |"
        if args.against:
            line += f" {best['against'][shape]:.2f} | {best['against'][shape] / us:.2f} |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
