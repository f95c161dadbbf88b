// The integer units rewrites/qdq_units.cc builds out of QDQ MatMul/Gemm (QGemm) and Conv (QConv) patterns,
// their shared quantization parameters, and the driver that splits an int8 GEMM over the pool. A unit's inputs
// and the stages folded into it: unit_stages.h.
#pragma once

#include <functional>

#include "gemm_tasks.h"
#include "op.h"
#include "quant_params.h"
#include "unit_stages.h"

namespace optim {

// One row of a quantized tensor (uint8/int8) minus its zero point, as int16, zero-filled from k to
// `padded` (K padded to even for the int16-pair kernels: a plain 0 is real 0).
template <typename T>
inline void widen_row(const T* __restrict x, int64_t k, int32_t zero, int64_t padded, int16_t* __restrict row) {
  for (int64_t kk = 0; kk < k; ++kk) row[kk] = static_cast<int16_t>(static_cast<int32_t>(x[kk]) - zero);
  for (int64_t kk = k; kk < padded; ++kk) row[kk] = 0;
}


// C = epilogue(A x B) over the pool, in tiles of rows x panels (see kernels::QgemmS16Fn); `done`, when given,
// sees each tile on the thread that made it.
void run_qgemm_s16(const RunContext& rc, int64_t m, int64_t n, int64_t kp, const int16_t* a, int64_t lda,
               const int16_t* b_packed, void* c, int64_t ldc, const kernels::QgemmEpilogue& ep,
               const TileDone* done = nullptr);

}  // namespace optim
