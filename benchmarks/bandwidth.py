"""This machine's memory read bandwidth (bandwidth.cc, compiled with the system g++ into the benchmark cache): the
bound of a decode step that reads every weight once. `python benchmarks/bandwidth.py [--threads 2]` prints it."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from peak import compile_program

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "bandwidth.cc"


class BandwidthError(RuntimeError):
    """The probe could not be compiled or run."""


def build(cache: Path) -> Path:
    return compile_program(SOURCE, cache, BandwidthError)


def measure(cache: Path, threads: int, mib: int = 1024, passes: int = 5) -> float:
    """Bytes per second `threads` threads read together from a buffer of `mib` MiB, best of `passes`."""
    done = subprocess.run([str(build(cache)), str(threads), str(mib), str(passes)], capture_output=True, text=True)
    if done.returncode != 0:
        raise BandwidthError(f"the bandwidth probe exited with {done.returncode}: {done.stderr.strip()}")
    return float(done.stdout.split()[1])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=str(HERE / ".cache"))
    args = ap.parse_args()
    print(f"read bandwidth, {args.threads} thread(s): {measure(Path(args.cache), args.threads) / 1e9:.1f} GB/s")
