// AVX2 weight-only quantized GEMM (kernel_table.h, MatMulNBitsFn): matmul_nbits_columns.h's loop on 8-float
// registers, 16 codes as two of them. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "matmul_nbits_columns.h"

namespace optim::kernels {
namespace {

struct Ymm {
  using Reg = __m256;
  static constexpr int kPerCodes = 2;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  // 16 codes (nbits_codes16) as two vectors of 8 floats.
  static void codes16(const uint8_t* q, int bits, Reg* w) {
    const __m128i codes = nbits_codes16(q, bits);
    w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes));
    w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(codes, 8)));
  }
  static float reduce(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};

}  // namespace

void matmul_nbits_f32_avx2(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  nbits_rows<Ymm>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
