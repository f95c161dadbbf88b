// Packing of the B operand into the NR-column panels every SGEMM kernel reads (float32, or bf16 pairs for the
// bf16 GEMM), and the float32 <-> bfloat16 conversions.
#include <cstring>

#include "kernel_table.h"

namespace optim::kernels {

size_t sgemm_packed_b_floats(int64_t k, int64_t n) {
  const int64_t panels = (n + kSgemmNR - 1) / kSgemmNR;
  return static_cast<size_t>(panels * k * kSgemmNR);
}

void sgemm_pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, float* dst) {
  const int64_t panels = (n + kSgemmNR - 1) / kSgemmNR;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j0 = p * kSgemmNR;
    const int64_t cols = n - j0 < kSgemmNR ? n - j0 : kSgemmNR;
    float* out = dst + p * k * kSgemmNR;
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = out + kk * kSgemmNR;
      if (!trans_b) {
        std::memcpy(row, b + kk * ldb + j0, static_cast<size_t>(cols) * sizeof(float));
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = b[(j0 + j) * ldb + kk];
      }
      for (int64_t j = cols; j < kSgemmNR; ++j) row[j] = 0.f;
    }
  }
}

uint16_t bf16_from_f32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN: quiet, stays NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even (an overflow correctly gives inf)
  return static_cast<uint16_t>(bits >> 16);
}

float f32_from_bf16(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

size_t sgemm_bf16_packed_b_elems(int64_t k, int64_t n) {
  const int64_t panels = (n + kSgemmNR - 1) / kSgemmNR;
  return static_cast<size_t>(panels * sgemm_bf16_panel_pairs(k) * 2 * kSgemmNR);
}

void sgemm_bf16_pack_from_f32(const float* packed, int64_t k, int64_t n, uint16_t* dst) {
  const int64_t panels = (n + kSgemmNR - 1) / kSgemmNR, kp = (k + 1) / 2, kpp = sgemm_bf16_panel_pairs(k);
  std::memset(dst, 0, sgemm_bf16_packed_b_elems(k, n) * sizeof(uint16_t));
  for (int64_t p = 0; p < panels; ++p) {
    const float* in = packed + p * k * kSgemmNR;
    uint16_t* out = dst + p * kpp * 2 * kSgemmNR;
    for (int64_t q = 0; q < kp; ++q)
      for (int64_t j = 0; j < kSgemmNR; ++j) {
        out[(q * kSgemmNR + j) * 2] = bf16_from_f32(in[2 * q * kSgemmNR + j]);
        out[(q * kSgemmNR + j) * 2 + 1] = 2 * q + 1 < k ? bf16_from_f32(in[(2 * q + 1) * kSgemmNR + j]) : 0;
      }
  }
}

}  // namespace optim::kernels
