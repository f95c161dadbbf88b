// Splits one SGEMM over ORT's thread pool in tiles of rows x B panels; used by MatMul, Gemm and Conv.
#pragma once

#include "op.h"

namespace optim {

// C[m x n] (stride ldc) = epilogue(A[m x k] (stride lda) * B), B pre-packed with kernels::sgemm_pack_b.
void run_sgemm(const RunContext& rc, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b_packed, float* c, int64_t ldc, const kernels::SgemmEpilogue& ep);

// B packed once at compile time.
struct PackedMatrix {
  int64_t k = 0, n = 0;
  std::vector<float> data;
};
PackedMatrix pack_matrix(const float* b, int64_t k, int64_t n, bool trans_b);

}  // namespace optim
