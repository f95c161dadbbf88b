// AVX-512 weight-only quantized GEMM (kernel_table.h, MatMulNBitsFn). 4-bit codes in blocks of a multiple of 32
// (the default): a table lookup per block (columns_by_table below); otherwise matmul_nbits_columns.h's loop on
// 16-float registers. Compiled with -mavx512f (and the VNNI set).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "matmul_nbits_columns.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 4;

struct Zmm {
  using Reg = __m512;
  static constexpr int kPerCodes = 1;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  // 16 codes (nbits_codes16) as one vector of 16 floats.
  static void codes16(const uint8_t* q, int bits, Reg* w) {
    const __m128i codes = nbits_codes16(q, bits);
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes));
  }
  static float reduce(Reg v) { return _mm512_reduce_add_ps(v); }
};

// 4-bit codes in blocks of a multiple of 32: each block's 16 dequantized values (q - zero) * scale as a table in
// one register, looked up by the codes themselves (vpermps takes an index's low 4 bits): per 16 bytes of codes,
// one widening to 16 lanes (a byte each) and two lookups (low nibbles: the block's even k, high: the odd k) give
// 32 weights exactly as dequantized, against A's rows reordered once per call into even k then odd k per 32 values
// (zero past K, so the padded codes of the last block add nothing).
template <int R>
void columns_by_table(int64_t m, int64_t n0, int64_t n1, const MatMulNBitsArgs& a, const float* reordered, int64_t kp) {
  const int64_t blob = a.block / 2;
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t n = n0; n < n1; ++n) {
    __m512 even[R], odd[R];
    for (int r = 0; r < R; ++r) even[r] = _mm512_setzero_ps(), odd[r] = _mm512_setzero_ps();
    const uint8_t* q = a.b + n * a.blocks * blob;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const int64_t sb = n * a.blocks + b;
      const __m512 table = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(a.zeros[sb])), _mm512_set1_ps(a.scales[sb]));
      for (int64_t c = 0; c < a.block; c += 32, q += 16) {
        const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        const __m512 w_even = _mm512_permutexvar_ps(bytes, table);
        const __m512 w_odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
        const float* at = reordered + b * a.block + c;
        for (int r = 0; r < R; ++r) {
          even[r] = _mm512_fmadd_ps(_mm512_loadu_ps(at + r * kp), w_even, even[r]);
          odd[r] = _mm512_fmadd_ps(_mm512_loadu_ps(at + r * kp + 16), w_odd, odd[r]);
        }
      }
    }
    const float bias = a.bias ? a.bias[n] : 0.f;
    for (int r = 0; r < R; ++r) a.c[(m + r) * a.ldc + n] = _mm512_reduce_add_ps(_mm512_add_ps(even[r], odd[r])) + bias;
  }
}

// Rows [m, m + rows) of A reordered for columns_by_table: per 32 values, the 16 at even k, then the 16 at odd k.
void reorder_rows(const MatMulNBitsArgs& a, int64_t m, int64_t rows, int64_t kp, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a.a + (m + r) * a.lda;
    float* out = dst + r * kp;
    for (int64_t c = 0; c < kp; c += 32)
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t k = c + 2 * i;
        out[c + i] = k < a.k ? row[k] : 0.f;
        out[c + 16 + i] = k + 1 < a.k ? row[k + 1] : 0.f;
      }
  }
}

void by_table(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  const int64_t kp = a.blocks * a.block;
  thread_local std::vector<float> reordered;
  reordered.resize(static_cast<size_t>(kRows * kp));
  for (int64_t m = m0; m < m1;) {
    const int64_t rows = std::min<int64_t>(kRows, m1 - m);
    reorder_rows(a, m, rows, kp, reordered.data());
    if (rows == 4) columns_by_table<4>(m, n0, n1, a, reordered.data(), kp);
    else if (rows == 3) columns_by_table<3>(m, n0, n1, a, reordered.data(), kp);
    else if (rows == 2) columns_by_table<2>(m, n0, n1, a, reordered.data(), kp);
    else columns_by_table<1>(m, n0, n1, a, reordered.data(), kp);
    m += rows;
  }
}

}  // namespace

void matmul_nbits_f32_avx512(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  if (a.bits == 4 && a.block % 32 == 0) {
    by_table(m0, m1, n0, n1, a);
    return;
  }
  nbits_rows<Zmm>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
