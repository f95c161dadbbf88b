"""OptimEP's AVX2 int8 depthwise kernel alone, one thread, on the bands MobileNetV2's blocks run it on
(dwconv_kernel.cc): a kernel change measured without a model's other steps, which on a noisy 2-core host drift by
more than the change.

    .venv/bin/python benchmarks/dwconv_kernel.py [--against OTHER_KERNELS_DIR] [--rounds 5] [--runs 300]

Compiles dwconv_kernel.cc with ep_plugin/kernels' depthwise sources (g++ -O3 -mavx2 -mfma, as the library builds
them) into the benchmarks' cache, and prints per shape the best time of --runs calls and GMAC/s, the best over
--rounds rounds. With --against (the kernels folder of another checkout, e.g. `git worktree add /tmp/base HEAD~1`
then /tmp/base/ep_plugin/kernels), both builds run in alternating rounds and the table gives their ratio
(> 1: this checkout faster). Needs an AVX2 CPU. Nothing is written outside the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "ep_plugin" / "kernels"
DRIVER = HERE / "dwconv_kernel.cc"
# The depthwise kernel and what its scalar fallbacks link against.
SOURCES = ("dwconv_avx2.cc", "dwconv_scalar.cc", "activation_scalar.cc", "math_f32_scalar.cc", "eltwise_f32_scalar.cc")
# (input width = height, channels, stride, output rows per band, output) of MobileNetV2's depthwise units.
SHAPES = [(112, 32, 1, 2, "uint8"), (112, 96, 2, 1, "int16"), (56, 144, 1, 2, "int16"), (56, 144, 2, 1, "int16"),
          (28, 192, 1, 4, "int16"), (14, 576, 1, 8, "int16"), (7, 960, 1, 7, "int16")]


def build(kernels: Path, cache: Path) -> Path:
    """The driver linked with `kernels`' sources, compiled now unless this exact text was before."""
    texts = [DRIVER.read_bytes()] + [(kernels / s).read_bytes() for s in SOURCES]
    texts += [p.read_bytes() for p in sorted(kernels.glob("*.h"))]
    binary = cache / f"dwconv_kernel-{hashlib.sha256(b''.join(texts)).hexdigest()[:12]}"
    if binary.exists():
        return binary
    compiler = shutil.which("g++")
    if compiler is None:
        sys.exit("g++ is not on PATH: dwconv_kernel.cc cannot be compiled")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    cmd = [compiler, "-O3", "-std=c++17", "-mavx2", "-mfma", f"-I{kernels}", str(DRIVER),
           *[str(kernels / s) for s in SOURCES], "-o", str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"g++ failed on dwconv_kernel.cc with {kernels}: {done.stderr.strip()[:800]}")
    tmp.replace(binary)
    return binary


def run_shape(binary: Path, shape: tuple, runs: int) -> float:
    """Best microseconds of `runs` calls."""
    h, c, s, rows, out = shape
    done = subprocess.run([str(binary), str(h), str(c), str(s), str(rows), out, str(runs)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{binary.name} {shape} exited with {done.returncode}: {done.stderr.strip()}")
    return float(done.stdout.split()[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, help="another checkout's ep_plugin/kernels folder, run in alternate rounds")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; each shape's best over them (default 5)")
    ap.add_argument("--runs", type=int, default=300, help="kernel calls per round and shape (default 300)")
    args = ap.parse_args(argv)
    if "avx2" not in Path("/proc/cpuinfo").read_text():
        sys.exit("this CPU has no AVX2: the kernel cannot run here")
    cache = HERE / ".cache"
    sides = {"this": build(KERNELS, cache)}
    if args.against:
        if not (args.against / SOURCES[0]).exists():
            sys.exit(f"{args.against} holds no {SOURCES[0]}: pass a checkout's ep_plugin/kernels folder")
        sides["against"] = build(args.against.resolve(), cache)
    best = {name: {shape: float("inf") for shape in SHAPES} for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for shape in SHAPES:
            for name in order:
                best[name][shape] = min(best[name][shape], run_shape(sides[name], shape, args.runs))
    from optim.common.machine import cpu_summary

    print(f"{cpu_summary()}; 1 thread, best of {args.rounds} rounds x {args.runs} calls")
    head = "| input | channels | stride | rows | out | us | GMAC/s |" + (" against us | ratio |" if args.against else "")
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for shape in SHAPES:
        h, c, s, rows, out = shape
        us = best["this"][shape]
        gmacs = rows * ((h + 2 - 3) // s + 1) * c * 9 / us / 1e3
        line = f"| {h}x{h} | {c} | {s} | {rows} | {out} | {us:.2f} | {gmacs:.1f} |"
        if args.against:
            line += f" {best['against'][shape]:.2f} | {best['against'][shape] / us:.2f} |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
