// The int8-activation weight-only GEMM (kernel_table.h, MatMulNBitsQ8Fn) on 256-bit registers, over B packed in
// groups of four columns: per 32 k, a group's 64 code bytes are two 32-byte loads (columns 0-1, 2-3), their low and
// high nibbles dotted with the 16 even and 16 odd activations broadcast to both 128-bit lanes, so each column's
// products land in its own four int32 lanes; per block those are scaled into float lanes by the column's scale
// (a permute spreads the group's four) x a_scale, and the zero points' part (their four bytes widened to floats,
// times the scales) one multiply-add per group and block. V::dot2 adds two u8 x s8 dot products (vpdpbusd with VNNI; vpmaddubsw pairs
// summed in int16 -- 4 x 15 x 127 fits -- then vpmaddwd on AVX2). Included only by the kernel files.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// The four zero points of a group's block (the bytes after its scales) as floats.
inline __m128 q8_zeros4(const uint8_t* params) {
  int32_t bytes;
  std::memcpy(&bytes, params + 4 * sizeof(float), sizeof bytes);
  return _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes)));
}

// Rows m..m+R-1 against the group of columns starting at group g; columns at n_end and past are not stored.
template <class V, int R>
void q8_ymm_group(int64_t m, int64_t g, int64_t n_end, const MatMulNBitsQ8Args& args) {
  const MatMulNBitsQ8Args a = args;  // a copy: fields stay in registers (the stores to c could alias the reference)
  const int64_t blocks = a.blocks, chunks = a.block / 32;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i spread_lo = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), spread_hi = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  const uint8_t* q = a.b + g * blocks * chunks * 64;
  const uint8_t* p = a.params + g * blocks * kQ8ParamBytes;
  __m256 acc[R][2];
  __m128 zero_part[R];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    zero_part[r] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b, p += kQ8ParamBytes) {
    __m256i sum[R][2];
    for (int r = 0; r < R; ++r) sum[r][0] = sum[r][1] = _mm256_setzero_si256();
    for (int64_t c = 0; c < chunks; ++c, q += 64) {
      __m256i even[R], odd[R];
      for (int r = 0; r < R; ++r) {
        const int8_t* x = a.aq + (m + r) * a.ldq + b * a.block + c * 32;
        even[r] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
        odd[r] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + h * 32));
        const __m256i lo = _mm256_and_si256(codes, mask), hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), mask);
        for (int r = 0; r < R; ++r) sum[r][h] = V::dot2(sum[r][h], lo, even[r], hi, odd[r]);
      }
    }
    const __m128 scale4 = _mm_loadu_ps(reinterpret_cast<const float*>(p));
    const __m128 scale_zero4 = _mm_mul_ps(scale4, q8_zeros4(p));
    const __m256 scale[2] = {_mm256_permutevar8x32_ps(_mm256_castps128_ps256(scale4), spread_lo),
                             _mm256_permutevar8x32_ps(_mm256_castps128_ps256(scale4), spread_hi)};
    for (int r = 0; r < R; ++r) {
      const __m256 a_scale = _mm256_set1_ps(a.a_scale[(m + r) * blocks + b]);
      for (int h = 0; h < 2; ++h)
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][h]), _mm256_mul_ps(scale[h], a_scale), acc[r][h]);
      zero_part[r] = _mm_fmadd_ps(scale_zero4, _mm_set1_ps(a.a_zero[(m + r) * blocks + b]), zero_part[r]);
    }
  }
  const int64_t n = g * kQ8Columns;
  for (int r = 0; r < R; ++r) {
    // Each column's four lanes summed: [c0 c2 c0 c2 | c1 c3 c1 c3] after two horizontal adds, then interleaved.
    __m256 t = _mm256_hadd_ps(acc[r][0], acc[r][1]);
    t = _mm256_hadd_ps(t, t);
    __m128 v = _mm_sub_ps(_mm_unpacklo_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)), zero_part[r]);
    if (a.bias) {
      float bias[kQ8Columns] = {};
      for (int64_t j = 0; j < kQ8Columns && n + j < n_end; ++j) bias[j] = a.bias[n + j];
      v = _mm_add_ps(v, _mm_loadu_ps(bias));
    }
    float* c = a.c + (m + r) * a.ldc + n;
    if (n + kQ8Columns <= n_end) {
      _mm_storeu_ps(c, v);
    } else {
      float out[kQ8Columns];
      _mm_storeu_ps(out, v);
      for (int64_t j = 0; n + j < n_end; ++j) c[j] = out[j];
    }
  }
}

// Rows two at a time (16 ymm registers hold two rows' sums and accumulators), then one; each group of columns.
template <class V>
void q8_ymm_rows(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  const int64_t g0 = n0 / kQ8Columns, g1 = (n1 + kQ8Columns - 1) / kQ8Columns;
  int64_t m = m0;
  for (; m + 2 <= m1; m += 2)
    for (int64_t g = g0; g < g1; ++g) q8_ymm_group<V, 2>(m, g, n1, a);
  for (; m < m1; ++m)
    for (int64_t g = g0; g < g1; ++g) q8_ymm_group<V, 1>(m, g, n1, a);
}

}  // namespace
}  // namespace optim::kernels
