// Runtime CPU feature detection: which instruction sets this machine (and its OS) can run.
#pragma once

namespace optim::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512vbmi = false;  // byte permutes (vpermb / vpermi2b): Ice Lake, Zen 4 and later
  bool avx_vnni = false;
  bool avx512bf16 = false;  // vdpbf16ps / vcvtne2ps2bf16 (Cooper Lake, Sapphire Rapids, Zen 4 and later)
  bool amx_bf16 = false;    // tdpbf16ps, with the tile state enabled by the OS
  bool amx_int8 = false;  // AMX-TILE and AMX-INT8, with the tile state enabled by the OS (XCR0)
};

// Detected once; includes the OS check (XGETBV) that the wide registers are saved on context switch.
const CpuFeatures& cpu_features();

// AMX also needs the process's permission to use the tile data (Linux: arch_prctl ARCH_REQ_XCOMP_PERM),
// asked for once here. True when the CPU has AMX-INT8 and the permission was granted.
bool amx_usable();

}  // namespace optim::kernels
