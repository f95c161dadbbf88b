// The integer GEMM unit that qdq_fusion.cc builds out of QDQ MatMul/Gemm patterns, and the driver
// that splits an int8 GEMM over ORT's thread pool.
#pragma once

#include "op.h"

namespace optim {

// Domain of the ops OptimEP creates itself: never claimable from a user's model.
constexpr const char* kInternalDomain = "optim.internal";

// Input positions of an internal QGemm node (names of partition values; "" when absent). Attributes:
// transB (W stored N x K), relu (a Relu sat between the product and the QuantizeLinear).
enum QGemmInput : size_t {
  kQGemmX = 0, kQGemmXScale, kQGemmXZero, kQGemmW, kQGemmWScale, kQGemmWZero, kQGemmBias, kQGemmYScale, kQGemmYZero,
  kQGemmInputCount
};

// C = epilogue(A x B) over the pool, in tiles of rows x panels (see kernels::IgemmPackedFn).
void run_igemm(const RunContext& rc, int64_t m, int64_t n, int64_t kp, const int16_t* a, int64_t lda,
               const int16_t* b_packed, void* c, int64_t ldc, const kernels::IgemmEpilogue& ep);

}  // namespace optim
