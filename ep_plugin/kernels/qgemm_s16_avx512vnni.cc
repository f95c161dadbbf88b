// AVX-512 VNNI int8 GEMM over int16 pairs (kernel_table.h's QgemmS16Fn, the packing of qgemm_s16_pack_b): the
// exact path for products the u8 x s8 kernels cannot take, mostly attention's two quantized activations
// (QMatMul). An 8x16 tile: per K pair, one zmm of 16 columns' pairs and one vpdpwssd per row (two int16
// products summed into int32 with the accumulator, exact: |a*b + a'*b'| <= 2 * 255 * 255), twice the
// multiply-adds per instruction of AVX2's vpmaddwd + vpaddd at the same packing. The epilogue is
// qstore_avx512.h's, equal to the scalar reference bit for bit. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

template <int MR>
void tile(int64_t kp, const int16_t* a, int64_t lda, const int16_t* panel, int64_t i, int64_t j0, int64_t cols,
          const QgemmEpilogue& ep, void* c, int64_t ldc) {
  __m512i acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kp; ++q) {
    const __m512i b = _mm512_loadu_si512(panel + q * 32);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * q, sizeof(pair));
      acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_set1_epi32(pair), b);
    }
  }
  alignas(64) int32_t out[16];
  for (int r = 0; r < MR; ++r) {
    _mm512_store_si512(out, acc[r]);
    if (cols == 16) {
      store16(out, i + r, j0, ep, c, (i + r) * ldc + j0);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) qgemm_store(out[j], i + r, j0 + j, ep, c, (i + r) * ldc + j0 + j);
  }
}

using TileFn = void (*)(int64_t, const int16_t*, int64_t, const int16_t*, int64_t, int64_t, int64_t, const QgemmEpilogue&,
                        void*, int64_t);
constexpr TileFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

}  // namespace

void qgemm_s16_avx512vnni_8x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kp, const int16_t* a,
                               int64_t lda, const int16_t* b_packed, void* c, int64_t ldc, const QgemmEpilogue& ep) {
  for (int64_t p = p0; p < p1; ++p) {
    const int16_t* panel = b_packed + p * kp * 2 * kQgemmNR;
    const int64_t j0 = p * kQgemmNR, cols = std::min<int64_t>(kQgemmNR, n - j0);
    for (int64_t i = m0; i < m1; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m1 - i);
      kTiles[rows](kp, a + i * lda, lda, panel, i, j0, cols, ep, c, ldc);
    }
  }
}

}  // namespace optim::kernels
