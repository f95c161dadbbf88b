// AVX2 int8 GEMM over packed B with a 4x16 tile: per K pair, one vpmaddwd per row and 8 columns
// (int16 pairs multiplied and summed into int32, exact), 8 int32 accumulators in registers. The
// epilogue runs the same float operations as qgemm_epilogue.h, eight columns at a time, so results
// equal the scalar reference bit for bit. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "qstore_avx2.h"

namespace optim::kernels {
namespace {

template <int MR>
inline void tile(int64_t kp, const int16_t* a, int64_t lda, const int16_t* panel, int32_t* out /* MR x 16 */) {
  __m256i c0[MR], c1[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    c0[r] = _mm256_setzero_si256();
    c1[r] = _mm256_setzero_si256();
  }
  for (int64_t q = 0; q < kp; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 32 + 16));
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * q, sizeof(pair));
      const __m256i av = _mm256_set1_epi32(pair);
      c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(av, b0));
      c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(av, b1));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16), c0[r]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16 + 8), c1[r]);
  }
}

}  // namespace

void qgemm_s16_avx2_4x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kp, const int16_t* a,
                            int64_t lda, const int16_t* b_packed, void* c, int64_t ldc, const QgemmEpilogue& ep) {
  alignas(32) int32_t acc[kQgemmMR * kQgemmNR];
  for (int64_t p = p0; p < p1; ++p) {
    const int16_t* panel = b_packed + p * kp * 2 * kQgemmNR;
    const int64_t j0 = p * kQgemmNR;
    const int64_t cols = std::min<int64_t>(kQgemmNR, n - j0);
    int64_t i = m0;
    for (; i + kQgemmMR <= m1; i += kQgemmMR) {
      tile<4>(kp, a + i * lda, lda, panel, acc);
      for (int r = 0; r < 4; ++r) store_row(acc + r * kQgemmNR, i + r, j0, cols, ep, c, ldc);
    }
    const int64_t rest = m1 - i;
    switch (rest) {
      case 3: tile<3>(kp, a + i * lda, lda, panel, acc); break;
      case 2: tile<2>(kp, a + i * lda, lda, panel, acc); break;
      case 1: tile<1>(kp, a + i * lda, lda, panel, acc); break;
      default: break;
    }
    for (int64_t r = 0; r < rest; ++r) store_row(acc + r * kQgemmNR, i + r, j0, cols, ep, c, ldc);
  }
}

}  // namespace optim::kernels
