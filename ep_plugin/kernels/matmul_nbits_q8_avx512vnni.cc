// AVX-512 VNNI weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn), over B packed in groups of
// four columns: per 32 k one 64-byte load holds a group's codes, column j in 128-bit lane j; its low and high
// nibbles meet the 16 even and 16 odd activations broadcast to every lane (vpdpbusd), so each column's products
// land in its own four int32 lanes. Per block those are scaled into float lanes by the column's scale (a permute
// spreads the group's four) x a_scale; the zero points' part (their four bytes widened to floats, times the scales)
// one multiply-add per group and block. Several groups per pass give the accumulators independent chains. Compiled with
// -mavx512f (and the VNNI set).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

// Rows m..m+R-1 against G groups of columns from group g; columns at n_end and past are not stored.
template <int R, int G>
void q8_zmm_groups(int64_t m, int64_t g, int64_t n_end, const MatMulNBitsQ8Args& args) {
  const MatMulNBitsQ8Args a = args;  // a copy: fields stay in registers (the stores to c could alias the reference)
  const int64_t blocks = a.blocks, chunks = a.block / 32;
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const uint8_t* q[G];
  const uint8_t* p[G];
  __m512 acc[R][G];
  __m128 zero_part[R][G];
  for (int j = 0; j < G; ++j) {
    q[j] = a.b + (g + j) * blocks * chunks * 64;
    p[j] = a.params + (g + j) * blocks * kQ8ParamBytes;
    for (int r = 0; r < R; ++r) {
      acc[r][j] = _mm512_setzero_ps();
      zero_part[r][j] = _mm_setzero_ps();
    }
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i sum[R][G];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < G; ++j) sum[r][j] = _mm512_setzero_si512();
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i even[R], odd[R];
      for (int r = 0; r < R; ++r) {
        const int8_t* x = a.aq + (m + r) * a.ldq + b * a.block + c * 32;
        even[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
        odd[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
      }
      for (int j = 0; j < G; ++j) {
        const __m512i codes = _mm512_loadu_si512(q[j] + (b * chunks + c) * 64);
        const __m512i lo = _mm512_and_si512(codes, mask), hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), mask);
        for (int r = 0; r < R; ++r) sum[r][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[r][j], lo, even[r]), hi, odd[r]);
      }
    }
    for (int j = 0; j < G; ++j) {
      const uint8_t* params = p[j] + b * kQ8ParamBytes;
      int32_t zero_bytes;
      std::memcpy(&zero_bytes, params + 4 * sizeof(float), sizeof zero_bytes);
      const __m128 scale4 = _mm_loadu_ps(reinterpret_cast<const float*>(params));
      const __m128 scale_zero4 = _mm_mul_ps(scale4, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(zero_bytes))));
      const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(scale4));
      for (int r = 0; r < R; ++r) {
        const float a_scale = a.a_scale[(m + r) * blocks + b];
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][j]), _mm512_mul_ps(scale, _mm512_set1_ps(a_scale)), acc[r][j]);
        zero_part[r][j] = _mm_fmadd_ps(scale_zero4, _mm_set1_ps(a.a_zero[(m + r) * blocks + b]), zero_part[r][j]);
      }
    }
  }
  const __m512i firsts = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int j = 0; j < G; ++j) {
    const int64_t n = (g + j) * kQ8Columns;
    for (int r = 0; r < R; ++r) {
      // Each 128-bit lane's four floats summed into its first, the four firsts gathered: the group's columns.
      __m512 t = _mm512_add_ps(acc[r][j], _mm512_permute_ps(acc[r][j], 0xB1));
      t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));
      __m128 v = _mm_sub_ps(_mm512_castps512_ps128(_mm512_permutexvar_ps(firsts, t)), zero_part[r][j]);
      const __mmask8 valid = static_cast<__mmask8>(n + kQ8Columns <= n_end ? 0xF : (1u << (n_end - n)) - 1);
      if (a.bias) v = _mm_add_ps(v, _mm_maskz_loadu_ps(valid, a.bias + n));
      _mm_mask_storeu_ps(a.c + (m + r) * a.ldc + n, valid, v);
    }
  }
}

}  // namespace

// Rows four at a time with one group per pass, two rows or one with two groups per pass (then one for an odd last).
void matmul_nbits_q8_avx512vnni(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  const int64_t g0 = n0 / kQ8Columns, g1 = (n1 + kQ8Columns - 1) / kQ8Columns;
  auto rows = [&](auto count, int64_t m) {
    constexpr int R = decltype(count)::value;
    constexpr int G = R == 4 ? 1 : 2;
    int64_t g = g0;
    for (; g + G <= g1; g += G) q8_zmm_groups<R, G>(m, g, n1, a);
    for (; g < g1; ++g) q8_zmm_groups<R, 1>(m, g, n1, a);
  };
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) rows(std::integral_constant<int, 4>{}, m);
  for (; m + 2 <= m1; m += 2) rows(std::integral_constant<int, 2>{}, m);
  for (; m < m1; ++m) rows(std::integral_constant<int, 1>{}, m);
}

}  // namespace optim::kernels
