#include "cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace optim::kernels {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_saved = (xcr0 & 0x6) == 0x6;
  const bool zmm_saved = (xcr0 & 0xE6) == 0xE6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm_saved && (b & (1u << 5));
  f.fma = ymm_saved && fma;
  f.avx512f = zmm_saved && (b & (1u << 16));
  f.avx512bw = zmm_saved && (b & (1u << 30));
  f.avx512vl = zmm_saved && (b & (1u << 31));
  f.avx512vnni = zmm_saved && (c & (1u << 11));
  f.avx512vbmi = zmm_saved && (c & (1u << 1));
  const bool tiles_saved = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  f.amx_int8 = tiles_saved && (d & (1u << 24)) && (d & (1u << 25));
  f.amx_bf16 = tiles_saved && (d & (1u << 24)) && (d & (1u << 22));
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
    f.avx_vnni = ymm_saved && (a1 & (1u << 4));
    f.avx512bf16 = zmm_saved && (a1 & (1u << 5));
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool amx_usable() {
  static const bool usable = [] {
    if (!cpu_features().amx_int8) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return usable;
}

}  // namespace optim::kernels
