// Scalar reference int8 GEMM over packed B (see kernel_table.h): the definition every optimized
// integer kernel must equal exactly.
#include <algorithm>

#include "qgemm_epilogue.h"

namespace optim::kernels {

void qgemm_s16_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kp, const int16_t* a,
                         int64_t lda, const int16_t* b_packed, void* c, int64_t ldc, const QgemmEpilogue& ep) {
  for (int64_t p = p0; p < p1; ++p) {
    const int16_t* panel = b_packed + p * kp * 2 * kQgemmNR;
    const int64_t j0 = p * kQgemmNR;
    const int64_t cols = std::min<int64_t>(kQgemmNR, n - j0);
    for (int64_t i = m0; i < m1; ++i) {
      int32_t acc[kQgemmNR] = {0};
      const int16_t* arow = a + i * lda;
      for (int64_t q = 0; q < kp; ++q) {
        const int32_t a0 = arow[2 * q], a1 = arow[2 * q + 1];
        const int16_t* bq = panel + q * 2 * kQgemmNR;
        for (int64_t j = 0; j < kQgemmNR; ++j) acc[j] += a0 * bq[2 * j] + a1 * bq[2 * j + 1];
      }
      for (int64_t j = 0; j < cols; ++j) qgemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
    }
  }
}

}  // namespace optim::kernels
