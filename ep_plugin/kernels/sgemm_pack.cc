// Packing of the B operand into the NR-column panels every SGEMM kernel reads.
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

}  // namespace optim::kernels
