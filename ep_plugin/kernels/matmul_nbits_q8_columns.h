// The int8-activation weight-only GEMM's loops (kernel_table.h, MatMulNBitsQ8Fn), written once over the dot product
// of 32 u8 codes with 32 s8 activations into 8 int32 lanes (V::dot32: vpmaddubsw + vpmaddwd on AVX2, vpdpbusd with
// VNNI): a lone row (a decode step) four columns at a time (q8_row_columns), groups of rows a column at a time
// (q8_columns). Included only by the kernel files.
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "matmul_nbits_columns.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

inline float q8_reduce(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// 16 bytes of 4-bit codes as 32 u8 codes, low nibbles then high (A's even-then-odd order): the bytes in both halves
// (a load, no shuffle), the high half shifted by a nibble.
inline __m256i q8_codes32(const uint8_t* q, __m256i mask) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  return _mm256_and_si256(_mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xF0), mask);
}

// Sum over blocks of scale x zero (column n) x a_scale x a_sum (row m), 8 blocks per vector.
inline float q8_zero_part(const MatMulNBitsQ8Args& a, int64_t m, int64_t n) {
  const float* s = a.scales + n * a.blocks;
  const float* z = a.zeros + n * a.blocks;
  const float* as = a.a_scale + m * a.blocks;
  const int32_t* sum = a.a_sum + m * a.blocks;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= a.blocks; b += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(as + b), _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sum + b))));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(s + b), _mm256_loadu_ps(z + b)), x, acc);
  }
  float part = q8_reduce(acc);
  for (; b < a.blocks; ++b) part += s[b] * z[b] * as[b] * static_cast<float>(sum[b]);
  return part;
}

// Per column and block, the block's codes widened once to 32 bytes and dotted with up to R rows; per block the
// int32 lanes scaled into float lanes by scale x a_scale, into two accumulators by the block's parity (one would
// wait on the multiply-add's latency every block); the zero points' part after the column's codes.
template <class V, int R>
void q8_columns(int64_t m, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& args) {
  const MatMulNBitsQ8Args a = args;  // a copy: fields stay in registers (the stores to c could alias the reference)
  const int64_t blob = a.block / 2, ldq = a.ldq, blocks = a.blocks, block = a.block;
  const int8_t* rows = a.aq + m * ldq;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  // Block b's dot products with the R rows, each scaled by scale x a_scale and added into acc.
  auto add_block = [&](int64_t n, int64_t b, __m256 (&acc)[R]) {
    const uint8_t* q = a.b + (n * blocks + b) * blob;
    const int8_t* x = rows + b * block;
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int64_t c = 0; c < block; c += 32, q += 16, x += 32) {
      const __m256i codes = q8_codes32(q, mask);
      for (int r = 0; r < R; ++r)
        sum[r] = V::dot32(sum[r], codes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * ldq)));
    }
    const float scale = a.scales[n * blocks + b];
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), _mm256_set1_ps(scale * a.a_scale[(m + r) * blocks + b]), acc[r]);
  };
  for (int64_t n = n0; n < n1; ++n) {
    __m256 even[R], odd[R];
    for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      add_block(n, b, even);
      add_block(n, b + 1, odd);
    }
    if (b < blocks) add_block(n, b, even);
    const float bias = a.bias ? a.bias[n] : 0.f;
    for (int r = 0; r < R; ++r)
      a.c[(m + r) * a.ldc + n] = q8_reduce(_mm256_add_ps(even[r], odd[r])) - q8_zero_part(a, m + r, n) + bias;
  }
}

// One row (a decode step's) against C columns at once: the row's 32 activations of a step loaded once for all C,
// and C independent chains of block sums, so no chain waits on the multiply-add's latency.
template <class V, int C>
void q8_row_columns(int64_t m, int64_t n0, const MatMulNBitsQ8Args& args) {
  const MatMulNBitsQ8Args a = args;
  const int64_t blob = a.block / 2, blocks = a.blocks, block = a.block;
  const int8_t* row = a.aq + m * a.ldq;
  const float* a_scale = a.a_scale + m * blocks;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const uint8_t* codes_of[C];
  const float* scales_of[C];
  __m256 acc[C];
  for (int c = 0; c < C; ++c) {
    codes_of[c] = a.b + (n0 + c) * blocks * blob;
    scales_of[c] = a.scales + (n0 + c) * blocks;
    acc[c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i sum[C];
    for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
    for (int64_t k = 0; k < block; k += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * block + k));
      for (int c = 0; c < C; ++c) sum[c] = V::dot32(sum[c], q8_codes32(codes_of[c] + b * blob + k / 2, mask), x);
    }
    const __m256 sa = _mm256_set1_ps(a_scale[b]);
    for (int c = 0; c < C; ++c)
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_mul_ps(_mm256_set1_ps(scales_of[c][b]), sa), acc[c]);
  }
  for (int c = 0; c < C; ++c) {
    const int64_t n = n0 + c;
    a.c[m * a.ldc + n] = q8_reduce(acc[c]) - q8_zero_part(a, m, n) + (a.bias ? a.bias[n] : 0.f);
  }
}

template <class V>
void q8_rows(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  in_row_groups(m0, m1, [&](auto rows, int64_t m) {
    constexpr int R = decltype(rows)::value;
    if constexpr (R == 1) {  // a lone row: four columns at a time
      int64_t n = n0;
      for (; n + 4 <= n1; n += 4) q8_row_columns<V, 4>(m, n, a);
      if (n < n1) q8_columns<V, 1>(m, n, n1, a);
    } else {
      q8_columns<V, R>(m, n0, n1, a);
    }
  });
}

}  // namespace
}  // namespace optim::kernels
