// B packing for the integer GEMMs (kernel_table.h): int16 pair panels for the s16 kernels, int8 quad
// panels for the u8 x s8 ones. Plain C++: every ISA reads the same layouts.
#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

size_t qgemm_s16_packed_b_elems(int64_t kp, int64_t n) {
  const int64_t panels = (n + kQgemmNR - 1) / kQgemmNR;
  return static_cast<size_t>(panels * kp * 2 * kQgemmNR);
}

void qgemm_s16_pack_b(const int16_t* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int16_t* dst) {
  const int64_t kp = (k + 1) / 2;
  const int64_t panels = (n + kQgemmNR - 1) / kQgemmNR;
  auto at = [&](int64_t kk, int64_t j) -> int16_t {
    if (kk >= k || j >= n) return 0;
    return trans_b ? b[j * ldb + kk] : b[kk * ldb + j];
  };
  for (int64_t p = 0; p < panels; ++p) {
    int16_t* out = dst + p * kp * 2 * kQgemmNR;
    for (int64_t q = 0; q < kp; ++q) {
      for (int64_t j = 0; j < kQgemmNR; ++j) {
        out[(q * kQgemmNR + j) * 2] = at(2 * q, p * kQgemmNR + j);
        out[(q * kQgemmNR + j) * 2 + 1] = at(2 * q + 1, p * kQgemmNR + j);
      }
    }
  }
}

size_t qgemm_u8s8_packed_b_bytes(int64_t kq, int64_t n) {
  return static_cast<size_t>((n + kQuadNR - 1) / kQuadNR * kq * 4 * kQuadNR);
}

void qgemm_u8s8_pack_b(const int8_t* b, int64_t ldb, int64_t k, int64_t n, int64_t kq, int8_t* dst) {
  const int64_t panels = (n + kQuadNR - 1) / kQuadNR;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t q = 0; q < kq; ++q)
      for (int64_t j = 0; j < kQuadNR; ++j)
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t kk = 4 * q + t, col = p * kQuadNR + j;
          dst[((p * kq + q) * kQuadNR + j) * 4 + t] = kk < k && col < n ? b[kk * ldb + col] : 0;
        }
}

bool u8s8_pairs_exact(const int8_t* b, int64_t ldb, int64_t k, int64_t n) {
  for (int64_t r = 0; r < k; r += 2)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t w0 = b[r * ldb + j], w1 = r + 1 < k ? b[(r + 1) * ldb + j] : 0;
      const int32_t pos = std::max(w0, 0) + std::max(w1, 0), neg = std::min(w0, 0) + std::min(w1, 0);
      if (pos > 128 || neg < -128) return false;
    }
  return true;
}

}  // namespace optim::kernels
