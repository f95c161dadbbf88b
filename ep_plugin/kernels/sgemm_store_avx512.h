// The float GEMM epilogue (SgemmEpilogue) for up to 16 columns of one row in AVX-512, shared by the float32 and
// bfloat16 GEMM kernels: alpha, accumulate, biases and Relu in sgemm_store_scalar's order. Included only by
// files compiled with -mavx512f.
#pragma once

#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: compiled into AVX-512 files only

// `cols` <= 16 columns of row i from the tile's sums, masked past them.
inline void store_row(const float* acc, float* crow, int64_t i, int64_t j0, int64_t cols, const SgemmEpilogue& ep) {
  const __mmask16 m = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
  __m512 v = _mm512_mul_ps(_mm512_set1_ps(ep.alpha), _mm512_loadu_ps(acc));
  if (ep.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, crow));
  if (ep.bias_col) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, ep.bias_col + j0));
  if (ep.bias_row) v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias_row[i]));
  if (ep.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);  // NaN propagates (second operand wins)
  _mm512_mask_storeu_ps(crow, m, v);
}

}  // namespace
}  // namespace optim::kernels
