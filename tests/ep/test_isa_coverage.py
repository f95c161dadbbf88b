"""Which kernel sets this machine tests. scalar and AVX2 always run; the AVX-512 VNNI and AMX kernels
run wherever the CPU (and, for AMX, the OS) allows them, and every test parametrized over ISAS then
covers them. Where they are absent this says so, as a skip with the reason, instead of silently
testing less. The kernel names come from the EP's own list (kernel_list.inc), never from here."""

from __future__ import annotations

import pytest

from helpers import ISAS
from optim.ep_plugin import ISAS as ALL_ISAS
from optim.ep_plugin.tools.doctor import diagnose, isa_supported


def kernel_rows() -> list[dict]:
    report = diagnose("scalar")
    assert report["ok"], report.get("error")
    return report["kernel_rows"]


@pytest.mark.parametrize("isa", ALL_ISAS)
def test_each_isa_table_holds_every_kernel_written_for_it(isa):
    if not isa_supported(isa):
        pytest.skip(f"this CPU (or OS) does not run isa={isa}: its kernels are not tested on this machine")
    assert isa in ISAS
    report = diagnose(isa)
    assert report["ok"], report.get("error")
    rows = kernel_rows()
    own = {r["name"] for r in rows if r["isa"] == isa and r["feature_present"] and not r["bf16_only"]}
    lacking = [r["name"] for r in rows if r["isa"] == isa and not r["feature_present"]]
    if lacking:  # said, not silently dropped: these need an extension this CPU lacks
        print(f"isa={isa}: not tested here (CPU lacks {sorted({r['feature'] for r in rows if r['name'] in lacking})}): {lacking}")
    assert own, f"no kernel is listed for isa={isa}"
    assert own <= set(report["kernels"]), sorted(own - set(report["kernels"]))
    # The bf16 GEMM is only in the precision=bf16 tables: the one written for this ISA is the one it runs there.
    bf16_own = [r["name"] for r in rows if r["isa"] == isa and r["feature_present"] and r["bf16_only"]]
    if bf16_own:
        assert report["bf16"] in bf16_own and report["bf16"] not in report["kernels"]


def test_every_family_has_one_kernel_per_table_and_a_scalar_reference_or_is_optional():
    rows = kernel_rows()
    families = {r["family"] for r in rows}
    report = diagnose("scalar")
    chosen = {r["name"]: r["family"] for r in rows if r["name"] in report["kernels"]}
    # The scalar table: exactly the scalar rows, one per family that has one (the bf16 GEMM only with precision=bf16).
    assert sorted(chosen.values()) == sorted({r["family"] for r in rows if r["isa"] == "scalar" and not r["bf16_only"]})
    for isa in ISAS:
        names = diagnose(isa)["kernels"]
        per_family = [next(r["family"] for r in rows if r["name"] == n) for n in names]
        assert len(per_family) == len(set(per_family)), f"isa={isa} chose two kernels of one family: {names}"
        assert set(per_family) <= families


def test_kernel_names_say_dtype_op_and_isa():
    for r in kernel_rows():
        isa_tag = {"avx512vnni": "avx512"}.get(r["isa"], r["isa"])
        assert isa_tag in r["name"], r
