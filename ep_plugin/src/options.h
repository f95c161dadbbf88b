// OptimEP's options. Applications pass them as EP options (`add_provider_for_devices(devs, {"isa": "scalar"})`);
// ORT hands them over as session config entries `ep.optimep.<key>`.
#pragma once

#include <string>

#include "../kernels/kernel_table.h"
#include "ort_api.h"

namespace optim {

struct EpOptions {
  kernels::Isa isa = kernels::best_isa();  // isa=auto|scalar|avx2
  size_t min_partition_nodes = 1;          // smaller connected groups stay on the CPU EP
  std::string placement_report;            // path: JSON of claimed groups and refused nodes, rewritten per GetCapability
  bool log = false;                        // log=1: each refusal as a warning on ORT's logger
  bool channels_last = true;               // channels_last=0: convolutions stay NCHW (direct kernels), for comparison
  bool winograd = true;                    // winograd=0: 3x3 convolutions stay direct (rewrites/winograd.cc)
  // precision=bf16: float MatMul / Gemm with constant weights run on the bf16 GEMM (inputs rounded to bfloat16,
  // float32 sums; kernel_table.h): needs AVX512-BF16 (or isa=scalar, the reference). Default fp32.
  bool bf16 = false;
  // profile=PATH: time every step of every fused node; PATH gets JSON (per partition: runs, per step its
  // label, op, total_ns and first input's shape) after each Compile and, with the final numbers, when the
  // session releases OptimEP. profile_warmup=N: each partition's first N runs are not counted.
  std::string profile;
  size_t profile_warmup = 0;
};

// Reads and validates the options; throws Error naming the option and the accepted values.
EpOptions read_options(const OrtSessionOptions* so);

// The kernel table the options choose (ISA and precision).
inline const kernels::KernelTable& kernel_table(const EpOptions& o) { return kernels::kernel_table(o.isa, o.bf16); }

}  // namespace optim
