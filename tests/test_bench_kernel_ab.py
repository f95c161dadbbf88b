"""benchmarks/kernel_ab.py: its drivers still compile against the kernels' argument structs and signatures (each
declares its kernel by the family's function type), one builds and runs, and the multiply-add counts are the
shapes' (the GMAC/s column divides by them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import kernel_ab  # noqa: E402

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the drivers need g++")


@needs_gxx
@pytest.mark.parametrize("name", sorted(kernel_ab.KERNEL_SET))
def test_each_driver_compiles_against_the_kernels_headers(name):
    driver = kernel_ab.HERE / kernel_ab.KERNEL_SET[name].driver
    done = subprocess.run(["g++", "-fsyntax-only", "-std=c++17", f"-I{kernel_ab.KERNELS}", str(driver)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@needs_gxx
@pytest.mark.skipif("avx2" not in Path("/proc/cpuinfo").read_text(), reason="the kernel needs AVX2")
@pytest.mark.parametrize("name, shape", [("conv_gemm_s16", (224, 16, 96, "centered_float")),
                                         ("sgemm", (13, 20, 40, 2))])  # a row tile and a panel short of whole
def test_the_gemm_drivers_build_once_and_time_a_shape(tmp_path, name, shape):
    # The depthwise driver's kernel takes ~30 s to compile even at -O0, so only the GEMMs' are linked and run here.
    kernel = kernel_ab.KERNEL_SET[name]
    binary = kernel_ab.build(kernel, kernel_ab.KERNELS, tmp_path, optimize="-O0")
    assert kernel_ab.build(kernel, kernel_ab.KERNELS, tmp_path, optimize="-O0") == binary  # not compiled again
    assert kernel_ab.run_shape(binary, shape, runs=2) > 0


def test_multiply_adds_of_a_band_and_of_gemm_rows():
    dw, gemm = kernel_ab.KERNEL_SET["dwconv"], kernel_ab.KERNEL_SET["conv_gemm_s16"]
    # 56 wide, stride 2, "same" padding: 28 outputs a row; 2 rows, 144 channels, 9 taps.
    assert dw.macs((56, 144, 2, 2, "int16")) == 2 * 28 * 144 * 9
    assert dw.macs((56, 144, 1, 1, "int16")) == 56 * 144 * 9
    assert gemm.macs((3136, 24, 144, "uint8")) == 3136 * 24 * 144
    assert kernel_ab.KERNEL_SET["sgemm"].macs((128, 384, 1536, 16)) == 128 * 384 * 1536
