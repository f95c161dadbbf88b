// AVX2 attention over a key / value cache (kernel_table.h, DotRowsFn and SumRowsFn). Scores: eight rows at a time,
// each dotted with x in its own accumulator, the eight reduced together by a tree of horizontal adds (one ymm of
// eight scores, not eight separate reductions). Weighted sums: 32 columns at a time, even and odd rows in two
// accumulator sets so no multiply-add waits on the previous one. Column tails (only) through masked loads and stores.
// Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

// Lanes below `count` (of 8) set: the mask of vmaskmovps.
inline __m256i first_lanes(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(count, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Sum of each of eight vectors, in order, as one vector.
inline __m256 reduce8(const __m256 (&a)[8]) {
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

}  // namespace

void dot_rows_f32_avx2(const float* x, const float* rows, int64_t ld, int64_t n, int64_t d, float scale, float* y) {
  const int64_t full = d / 8 * 8;
  const __m256i tail = first_lanes(d - full);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    __m256 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + (t + r) * ld + i), acc[r]);
    }
    if (full < d) {
      const __m256 xv = _mm256_maskload_ps(x + full, tail);
      for (int r = 0; r < 8; ++r)
        acc[r] = _mm256_fmadd_ps(xv, _mm256_maskload_ps(rows + (t + r) * ld + full, tail), acc[r]);
    }
    _mm256_storeu_ps(y + t, _mm256_mul_ps(reduce8(acc), _mm256_set1_ps(scale)));
  }
  for (; t < n; ++t) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(rows + t * ld + i), acc);
    if (full < d) acc = _mm256_fmadd_ps(_mm256_maskload_ps(x + full, tail), _mm256_maskload_ps(rows + t * ld + full, tail), acc);
    y[t] = scale * reduce_add(acc);
  }
}

namespace {

// Columns [i0, i0 + 32) of sum_rows: plain loads and stores when all 32 exist (kWhole), masked ones for the
// tail only (vmaskmovps costs several plain loads on AMD's cores).
template <bool kWhole>
void sum_rows_block(const float* w, const float* rows, int64_t ld, int64_t n, int64_t d, int64_t i0, float* y) {
  __m256i mask[4];
  for (int k = 0; k < 4; ++k) mask[k] = first_lanes(d - i0 - 8 * k);
  auto load = [&](const float* p, int k) { return kWhole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[k]); };
  __m256 even[4], odd[4];
  for (int k = 0; k < 4; ++k) even[k] = odd[k] = _mm256_setzero_ps();
  const float* row = rows + i0;
  int64_t t = 0;
  for (; t + 2 <= n; t += 2, row += 2 * ld) {
    const __m256 w0 = _mm256_set1_ps(w[t]), w1 = _mm256_set1_ps(w[t + 1]);
    for (int k = 0; k < 4; ++k) {
      even[k] = _mm256_fmadd_ps(w0, load(row + 8 * k, k), even[k]);
      odd[k] = _mm256_fmadd_ps(w1, load(row + ld + 8 * k, k), odd[k]);
    }
  }
  if (t < n) {
    const __m256 w0 = _mm256_set1_ps(w[t]);
    for (int k = 0; k < 4; ++k) even[k] = _mm256_fmadd_ps(w0, load(row + 8 * k, k), even[k]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m256 sum = _mm256_add_ps(even[k], odd[k]);
    if (kWhole) _mm256_storeu_ps(y + i0 + 8 * k, sum);
    else _mm256_maskstore_ps(y + i0 + 8 * k, mask[k], sum);
  }
}

}  // namespace

void sum_rows_f32_avx2(const float* w, const float* rows, int64_t ld, int64_t n, int64_t d, float* y) {
  int64_t i0 = 0;
  for (; i0 + 32 <= d; i0 += 32) sum_rows_block<true>(w, rows, ld, n, d, i0, y);
  if (i0 < d) sum_rows_block<false>(w, rows, ld, n, d, i0, y);
}

}  // namespace optim::kernels
