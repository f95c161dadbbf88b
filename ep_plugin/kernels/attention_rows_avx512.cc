// AVX-512 attention over a key / value cache (kernel_table.h, DotRowsFn and SumRowsFn): attention_rows_avx2.cc's
// loops on 16 floats, column tails under masks. Scores: eight rows at a time, each 512-bit accumulator halved to
// 256 bits, then one tree of horizontal adds gives the eight scores. Weighted sums: 64 columns at a time, even and
// odd rows in two accumulator sets. Compiled with -mavx512f.
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

inline __m256 halve(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Sum of each of eight vectors, in order, as one 256-bit vector.
inline __m256 reduce8(const __m512 (&a)[8]) {
  __m256 h[8];
  for (int r = 0; r < 8; ++r) h[r] = halve(a[r]);
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(h[4], h[5]), _mm256_hadd_ps(h[6], h[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

}  // namespace

void dot_rows_f32_avx512(const float* x, const float* rows, int64_t ld, int64_t n, int64_t d, float scale, float* y) {
  const int64_t full = d / 16 * 16;
  const __mmask16 tail = first_lanes(d - full);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    __m512 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      for (int r = 0; r < 8; ++r) acc[r] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(rows + (t + r) * ld + i), acc[r]);
    }
    if (tail) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      for (int r = 0; r < 8; ++r)
        acc[r] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, rows + (t + r) * ld + full), acc[r]);
    }
    _mm256_storeu_ps(y + t, _mm256_mul_ps(reduce8(acc), _mm256_set1_ps(scale)));
  }
  for (; t < n; ++t) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(rows + t * ld + i), acc);
    if (tail) acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + full), _mm512_maskz_loadu_ps(tail, rows + t * ld + full), acc);
    y[t] = scale * _mm512_reduce_add_ps(acc);
  }
}

void sum_rows_f32_avx512(const float* w, const float* rows, int64_t ld, int64_t n, int64_t d, float* y) {
  for (int64_t i0 = 0; i0 < d; i0 += 64) {
    __mmask16 mask[4];
    for (int k = 0; k < 4; ++k) mask[k] = first_lanes(d - i0 - 16 * k);
    __m512 even[4], odd[4];
    for (int k = 0; k < 4; ++k) even[k] = odd[k] = _mm512_setzero_ps();
    const float* row = rows + i0;
    int64_t t = 0;
    for (; t + 2 <= n; t += 2, row += 2 * ld) {
      const __m512 w0 = _mm512_set1_ps(w[t]), w1 = _mm512_set1_ps(w[t + 1]);
      for (int k = 0; k < 4; ++k) {
        even[k] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mask[k], row + 16 * k), even[k]);
        odd[k] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(mask[k], row + ld + 16 * k), odd[k]);
      }
    }
    if (t < n) {
      const __m512 w0 = _mm512_set1_ps(w[t]);
      for (int k = 0; k < 4; ++k) even[k] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mask[k], row + 16 * k), even[k]);
    }
    for (int k = 0; k < 4; ++k) _mm512_mask_storeu_ps(y + i0 + 16 * k, mask[k], _mm512_add_ps(even[k], odd[k]));
  }
}

}  // namespace optim::kernels
