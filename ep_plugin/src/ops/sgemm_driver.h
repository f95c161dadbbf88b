// Splits one SGEMM over ORT's thread pool in tiles of rows x B panels; used by MatMul, Gemm and Conv.
#pragma once

#include "gemm_tasks.h"
#include "op.h"
#include "../aligned_vector.h"

namespace optim {

// What runs on each finished block of C, rows [m0, m1) by columns [j0, j1), while it is in cache.
using SgemmAfter = TileDone;

// C[m x n] (stride ldc) = epilogue(A[m x k] (stride lda) * B), B pre-packed with kernels::sgemm_pack_b; then
// `after`, if given, on each block of C the task that made it has just finished.
void run_sgemm(const RunContext& rc, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b_packed, float* c, int64_t ldc, const kernels::SgemmEpilogue& ep,
               const SgemmAfter* after = nullptr);

// B packed once at compile time: float32 panels, or, once use_bf16 ran with a bf16 table (precision=bf16), bf16
// pair panels for the bf16 GEMM (the float ones then dropped).
struct PackedMatrix {
  int64_t k = 0, n = 0;
  AlignedVector<float> data;
  AlignedVector<uint16_t> bf16;
  const char* bf16_kernel = nullptr;  // the bf16 GEMM's name, once repacked
  // Repacks as bf16 when the table has the bf16 GEMM; called from an op's prepare().
  void use_bf16(const kernels::KernelTable& kt);
};
PackedMatrix pack_matrix(const float* b, int64_t k, int64_t n, bool trans_b);

// run_sgemm on a PackedMatrix: the float32 GEMM, or the bf16 one where it was repacked.
void run_sgemm(const RunContext& rc, int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c, int64_t ldc,
               const kernels::SgemmEpilogue& ep, const SgemmAfter* after = nullptr);

}  // namespace optim
