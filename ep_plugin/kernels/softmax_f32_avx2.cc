// AVX2 Softmax of one contiguous row (kernel_table.h, SoftmaxFn): as softmax_f32_avx512.cc on 8 floats at
// a time, the tail through a stack copy padded with -inf (its exp is 0). Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cmath>

#include <algorithm>

#include "math_avx2.h"

namespace optim::kernels {
namespace {

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

}  // namespace

void softmax_f32_avx2(const float* x, float* y, int64_t n) {
  const int64_t full = n / 8 * 8, rest = n - full;
  alignas(32) float tail[8];
  std::fill(tail, tail + 8, -INFINITY);
  std::copy(x + full, x + n, tail);
  __m256 mx = _mm256_load_ps(tail);
  for (int64_t i = 0; i < full; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  const __m256 m = _mm256_set1_ps(hmax(mx));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(y + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_load_ps(tail), m));  // -inf lanes give 0
  _mm256_store_ps(tail, e);
  sum = _mm256_add_ps(sum, e);
  const __m256 inv = _mm256_set1_ps(1.f / hsum(sum));
  for (int64_t i = 0; i < full; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  for (int64_t i = 0; i < rest; ++i) y[full + i] = tail[i] * _mm_cvtss_f32(_mm256_castps256_ps128(inv));
}

}  // namespace optim::kernels
