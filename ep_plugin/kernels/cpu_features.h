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
  bool avx_vnni = false;
};

// Detected once; includes the OS check (XGETBV) that the wide registers are saved on context switch.
const CpuFeatures& cpu_features();

}  // namespace optim::kernels
