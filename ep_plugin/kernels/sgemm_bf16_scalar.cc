// Scalar reference bfloat16 GEMM (kernel_table.h, SgemmBf16Fn) and A's conversion to bf16 rows: the definitions
// the bf16 kernels are tested against. Per column, each K pair adds its odd product and then its even one to a float32 sum, subnormal
// operands and sums flushed to zero, as AVX512-BF16's vdpbf16ps does.
#include <algorithm>
#include <cmath>

#include "sgemm_epilogue.h"

namespace optim::kernels {
namespace {

float flushed(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.f, x) : x; }

// A bf16 value as float32 with a subnormal flushed to zero.
float operand(uint16_t v) { return flushed(f32_from_bf16(v)); }

}  // namespace

void convert_bf16_scalar(const float* a, int64_t lda, int64_t k, int64_t r0, int64_t r1, uint16_t* dst) {
  const int64_t row = sgemm_bf16_row(k);
  for (int64_t r = r0; r < r1; ++r) {
    uint16_t* out = dst + r * row;
    for (int64_t kk = 0; kk < k; ++kk) out[kk] = bf16_from_f32(a[r * lda + kk]);
    for (int64_t kk = k; kk < row; ++kk) out[kk] = 0;
  }
}

void sgemm_bf16_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const uint16_t* a,
                       int64_t lda, const uint16_t* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t* panel = b_packed + p * sgemm_bf16_panel_pairs(k) * 2 * kSgemmNR;
    const int64_t j0 = p * kSgemmNR, cols = std::min<int64_t>(kSgemmNR, n - j0);
    for (int64_t i = m0; i < m1; ++i) {
      float acc[kSgemmNR] = {0};
      const uint16_t* arow = a + i * lda;
      for (int64_t q = 0; q < kp; ++q) {
        const float a0 = operand(arow[2 * q]), a1 = operand(arow[2 * q + 1]);  // zero past k
        const uint16_t* pair = panel + q * 2 * kSgemmNR;
        for (int64_t j = 0; j < kSgemmNR; ++j) {
          acc[j] = flushed(acc[j] + a1 * operand(pair[2 * j + 1]));
          acc[j] = flushed(acc[j] + a0 * operand(pair[2 * j]));
        }
      }
      sgemm_store_scalar(acc, cols, i, j0, c + i * ldc + j0, ep);
    }
  }
}

}  // namespace optim::kernels
