// Scalar reference SGEMM over packed B: the definition every optimized SGEMM is tested against.
#include <algorithm>

#include "sgemm_epilogue.h"

namespace optim::kernels {

void sgemm_f32_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const float* a,
                         int64_t lda, const float* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = b_packed + p * k * kSgemmNR;
    const int64_t j0 = p * kSgemmNR;
    const int64_t cols = std::min<int64_t>(kSgemmNR, n - j0);
    for (int64_t i = m0; i < m1; ++i) {
      float acc[kSgemmNR] = {0};
      const float* arow = a + i * lda;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = arow[kk];
        const float* brow = panel + kk * kSgemmNR;
        for (int64_t j = 0; j < kSgemmNR; ++j) acc[j] += av * brow[j];
      }
      float* crow = c + i * ldc + j0;
      sgemm_store_scalar(acc, cols, i, j0, crow, ep);
    }
  }
}

}  // namespace optim::kernels
