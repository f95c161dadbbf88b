// The direct float convolution's epilogue for one segment of one channel (alpha, bias, Relu), 8 floats
// at a time: shared by the AVX2 and AVX-512 kernels. Included only by files compiled with -mavx2.
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: compiled into AVX2 and AVX-512 files alike

// The epilogue for `cols` <= 8 pixels of channel i.
inline void store_segment(const float* acc, float* crow, int64_t i, int64_t cols, const SgemmEpilogue& ep) {
  if (cols == 8) {
    __m256 v = _mm256_mul_ps(_mm256_set1_ps(ep.alpha), _mm256_loadu_ps(acc));
    if (ep.bias_row) v = _mm256_add_ps(v, _mm256_set1_ps(ep.bias_row[i]));
    if (ep.relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);  // NaN propagates (second operand wins)
    _mm256_storeu_ps(crow, v);
    return;
  }
  for (int64_t t = 0; t < cols; ++t) {
    float v = ep.alpha * acc[t];
    if (ep.bias_row) v += ep.bias_row[i];
    if (ep.relu) v = std::max(v, 0.f);
    crow[t] = v;
  }
}

}  // namespace
}  // namespace optim::kernels
