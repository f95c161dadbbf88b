// AVX-512 Softmax of one contiguous row (kernel_table.h, SoftmaxFn) in three passes over 16 floats at a
// time, the tail masked: the maximum, exp(x - max) stored and summed, then the scale by 1 / sum.
// Attention rows are short (128 to 197 values, a few thousand rows): one call per row, no per-pass
// kernel calls. Compiled with -mavx512f.
#include <immintrin.h>

#include <cmath>

#include "math_avx512.h"

namespace optim::kernels {

void softmax_f32_avx512(const float* x, float* y, int64_t n) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < full; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + i));
  if (tail) mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, x + full));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < full; i += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(y + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (tail) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), m));
    _mm512_mask_storeu_ps(y + full, tail, e);
    sum = _mm512_mask_add_ps(sum, tail, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (tail) _mm512_mask_storeu_ps(y + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + full), inv));
}

}  // namespace optim::kernels
