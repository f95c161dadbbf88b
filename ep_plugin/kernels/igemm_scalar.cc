// Scalar reference int8 GEMM over packed B (see kernel_table.h): the definition every optimized
// integer kernel must equal exactly.
#include <algorithm>

#include "igemm_epilogue.h"

namespace optim::kernels {

size_t igemm_packed_b_elems(int64_t kp, int64_t n) {
  const int64_t panels = (n + kIgemmNR - 1) / kIgemmNR;
  return static_cast<size_t>(panels * kp * 2 * kIgemmNR);
}

void igemm_pack_b(const int16_t* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int16_t* dst) {
  const int64_t kp = (k + 1) / 2;
  const int64_t panels = (n + kIgemmNR - 1) / kIgemmNR;
  auto at = [&](int64_t kk, int64_t j) -> int16_t {
    if (kk >= k || j >= n) return 0;
    return trans_b ? b[j * ldb + kk] : b[kk * ldb + j];
  };
  for (int64_t p = 0; p < panels; ++p) {
    int16_t* out = dst + p * kp * 2 * kIgemmNR;
    for (int64_t q = 0; q < kp; ++q) {
      for (int64_t j = 0; j < kIgemmNR; ++j) {
        out[(q * kIgemmNR + j) * 2] = at(2 * q, p * kIgemmNR + j);
        out[(q * kIgemmNR + j) * 2 + 1] = at(2 * q + 1, p * kIgemmNR + j);
      }
    }
  }
}

size_t igemm_u8s8_packed_b_bytes(int64_t kq, int64_t n) {
  return static_cast<size_t>((n + kQuadNR - 1) / kQuadNR * kq * 4 * kQuadNR);
}

void igemm_u8s8_pack_b(const int8_t* b, int64_t ldb, int64_t k, int64_t n, int64_t kq, int8_t* dst) {
  const int64_t panels = (n + kQuadNR - 1) / kQuadNR;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t q = 0; q < kq; ++q)
      for (int64_t j = 0; j < kQuadNR; ++j)
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t kk = 4 * q + t, col = p * kQuadNR + j;
          dst[((p * kq + q) * kQuadNR + j) * 4 + t] = kk < k && col < n ? b[kk * ldb + col] : 0;
        }
}

void igemm_packed_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kp, const int16_t* a,
                         int64_t lda, const int16_t* b_packed, void* c, int64_t ldc, const IgemmEpilogue& ep) {
  for (int64_t p = p0; p < p1; ++p) {
    const int16_t* panel = b_packed + p * kp * 2 * kIgemmNR;
    const int64_t j0 = p * kIgemmNR;
    const int64_t cols = std::min<int64_t>(kIgemmNR, n - j0);
    for (int64_t i = m0; i < m1; ++i) {
      int32_t acc[kIgemmNR] = {0};
      const int16_t* arow = a + i * lda;
      for (int64_t q = 0; q < kp; ++q) {
        const int32_t a0 = arow[2 * q], a1 = arow[2 * q + 1];
        const int16_t* bq = panel + q * 2 * kIgemmNR;
        for (int64_t j = 0; j < kIgemmNR; ++j) acc[j] += a0 * bq[2 * j] + a1 * bq[2 * j + 1];
      }
      for (int64_t j = 0; j < cols; ++j) igemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
    }
  }
}

}  // namespace optim::kernels
