#include "kernel_table.h"

#include "cpu_features.h"

namespace optim::kernels {

const char* isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

bool isa_supported(Isa isa) {
  if (isa == Isa::kScalar) return true;
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma;
}

Isa best_isa() { return isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar; }

bool parse_isa(const std::string& text, Isa* out) {
  if (text == "auto" || text.empty()) { *out = best_isa(); return true; }
  if (text == "scalar") { *out = Isa::kScalar; return true; }
  if (text == "avx2") { *out = Isa::kAvx2; return true; }
  return false;
}

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable scalar{Isa::kScalar, sgemm_packed_scalar, binary_vv_scalar, binary_vs_scalar,
                                  binary_sv_scalar, unary_scalar, clip_scalar, igemm_packed_scalar,
                                  quantize_scalar, dequantize_scalar, qadd_scalar,
                                  {"sgemm_f32_scalar", "binary_f32_scalar", "unary_f32_scalar", "clip_f32_scalar",
                                   "igemm_s16pairs_scalar", "quantize_scalar", "dequantize_scalar", "qadd_scalar"}};
  static const KernelTable avx2{Isa::kAvx2, sgemm_packed_avx2_6x16, binary_vv_avx2, binary_vs_avx2,
                                binary_sv_avx2, unary_avx2, clip_avx2, igemm_packed_avx2_4x16,
                                quantize_avx2, dequantize_avx2, qadd_avx2,
                                {"sgemm_f32_avx2_6x16", "binary_f32_avx2", "unary_f32_avx2", "clip_f32_avx2",
                                 "igemm_s16pairs_avx2_4x16", "quantize_avx2", "dequantize_avx2", "qadd_avx2"}};
  return isa == Isa::kAvx2 ? avx2 : scalar;
}

}  // namespace optim::kernels
