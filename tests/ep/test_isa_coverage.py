"""Which kernel sets this machine tests. scalar and AVX2 always run; the AVX-512 VNNI and AMX kernels
run wherever the CPU (and, for AMX, the OS) allows them, and every test parametrized over ISAS then
covers them. Where they are absent this says so, as a skip with the reason, instead of silently
testing less."""

from __future__ import annotations

import pytest

from helpers import ISAS
from optim.ep_plugin.doctor import diagnose, isa_supported

# What each optional kernel set adds to the table `optim doctor` lists.
OPTIONAL = {"avx512vnni": ["igemm_u8s8_avx512vnni_8x32", "iconv_u8s8_avx512vnni_16x8", "sgemm_f32_avx512_8x32"],
            "amx": ["igemm_u8s8_amx_32x32", "iconv_u8s8_avx512vnni_16x8"]}


@pytest.mark.parametrize("isa", sorted(OPTIONAL))
def test_optional_kernel_set_is_tested_where_the_cpu_has_it(isa):
    if not isa_supported(isa):
        pytest.skip(f"this CPU (or OS) does not run isa={isa}: its kernels are not tested on this machine")
    assert isa in ISAS
    report = diagnose(isa)
    assert report["ok"], report.get("error")
    assert set(OPTIONAL[isa]) <= set(report["kernels"]), report["kernels"]
