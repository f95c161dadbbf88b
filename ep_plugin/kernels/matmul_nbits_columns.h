// The weight-only GEMM's generic per-column loop (kernel_table.h, MatMulNBitsFn), written once over a vector type V
// for the AVX2 and AVX-512 kernels: per column, each 16 codes of a block unpacked in registers (V::codes16: 4-bit
// two nibbles per byte, low first, or 8-bit) to float32 once and multiplied into up to four rows of A; per block the
// dot products scaled and summed in vectors, the zero point applied once per block through A's block sums; K's
// tail past the last whole 16 as the scalar reference does. V: Reg, kPerCodes (registers per 16 codes), zero(),
// set1, load, fmadd, codes16(q, bits, Reg*), reduce. Included only by those kernel files.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// 16 codes in K order as 16 bytes, from 8 bytes (4-bit: low nibble first) or 16 bytes (8-bit).
inline __m128i nbits_codes16(const uint8_t* q, int bits) {
  if (bits == 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm_unpacklo_epi8(_mm_and_si128(bytes, mask), _mm_and_si128(_mm_srli_epi16(bytes, 4), mask));
}

template <class V, int R>
void nbits_columns(int64_t m, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  using Reg = typename V::Reg;
  constexpr int64_t kWidth = 16 / V::kPerCodes;  // floats per register
  const int64_t blob = a.block * a.bits / 8, bytes16 = a.bits * 2;  // bytes of 16 codes
  const float* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = a.a + (m + r) * a.lda;
  for (int64_t n = n0; n < n1; ++n) {
    Reg acc[R];
    float tail[R];
    for (int r = 0; r < R; ++r) acc[r] = V::zero(), tail[r] = 0.f;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const uint8_t* block = a.b + (n * a.blocks + b) * blob;
      const uint8_t* q = block;
      const int64_t k0 = b * a.block, k1 = std::min(a.k, k0 + a.block), whole = k0 + (k1 - k0) / 16 * 16;
      Reg dot[R];
      for (int r = 0; r < R; ++r) dot[r] = V::zero();
      for (int64_t k = k0; k < whole; k += 16, q += bytes16) {
        Reg w[V::kPerCodes];
        V::codes16(q, a.bits, w);
        for (int r = 0; r < R; ++r)
          for (int i = 0; i < V::kPerCodes; ++i) dot[r] = V::fmadd(V::load(rows[r] + k + i * kWidth), w[i], dot[r]);
      }
      const int64_t sb = n * a.blocks + b;
      const float scale = a.scales[sb], zero = a.zeros[sb];
      const Reg vs = V::set1(scale);
      for (int r = 0; r < R; ++r) {
        acc[r] = V::fmadd(dot[r], vs, acc[r]);
        float rest = 0.f;  // K's tail in this block: codes past `whole`
        for (int64_t k = whole; k < k1; ++k) {
          const int64_t i = k - k0;
          const int code = a.bits == 4 ? (block[i / 2] >> (i % 2 * 4)) & 15 : block[i];
          rest += rows[r][k] * static_cast<float>(code);
        }
        tail[r] += scale * (rest - zero * a.asum[(m + r) * a.blocks + b]);
      }
    }
    const float bias = a.bias ? a.bias[n] : 0.f;
    for (int r = 0; r < R; ++r) a.c[(m + r) * a.ldc + n] = V::reduce(acc[r]) + tail[r] + bias;
  }
}

// Rows [m0, m1) four at a time, then two, then one: fn(std::integral_constant<int, R>{}, m) per group of R at m.
template <class Fn>
void in_row_groups(int64_t m0, int64_t m1, Fn&& fn) {
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) fn(std::integral_constant<int, 4>{}, m);
  for (; m + 2 <= m1; m += 2) fn(std::integral_constant<int, 2>{}, m);
  for (; m < m1; ++m) fn(std::integral_constant<int, 1>{}, m);
}

template <class V>
void nbits_rows(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  in_row_groups(m0, m1, [&](auto rows, int64_t m) { nbits_columns<V, decltype(rows)::value>(m, n0, n1, a); });
}

}  // namespace
}  // namespace optim::kernels
