// AVX2 NHWC int8 convolution GEMM on int16 pairs (kernel_table.h, ConvGemmQ8Args): 6 output pixels by one
// 16-column panel; per K pair, one broadcast pair per pixel and two vpmaddwd (int16 pairs multiplied and
// summed into int32, exact: |a*b + a'*b'| <= 2 * 255 * 255 < 2^31) per pixel, 12 ymm accumulators; a last
// panel of at most 8 columns on 12 pixels by 8 columns (half_tile). The
// epilogue is qstore_avx2.h's (store_panel in registers for full panels), so results equal the scalar reference
// bit for bit. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_rows.h"
#include "qstore_avx2.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 6;

// The two int16 values at p as one int32 (the pair a broadcast carries).
inline int32_t pair_at(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  return pair;
}

// Rows m..m+MR-1 by panels [p0, p1), one after the other, the rows' bases found once for them all (as the float
// tile, conv_gemm_f32_avx2.cc).
template <int MR>
void tile(const ConvGemmQ8Args& g, int64_t m, int64_t p0, int64_t p1) {
  const ConvRows& r = g.a;
  const int64_t kp_tap = r.k_tap / 2;
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const QgemmEpilogue& ep = *g.ep;
  for (int64_t p = p0; p < p1; ++p) {
    const int16_t* w = static_cast<const int16_t*>(g.w) + p * r.taps * kp_tap * 32;
    __m256i acc[MR][2];
    unrolled<MR>([&](auto i) OPTIM_INLINED { acc[i][0] = acc[i][1] = _mm256_setzero_si256(); });
    for_each_tap<MR, int16_t>(r, base, [&](const int16_t* const* a) OPTIM_INLINED {
      for (int64_t q = 0; q < kp_tap; ++q, w += 32) {
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
        unrolled<MR>([&](auto i) OPTIM_INLINED {
          const __m256i av = _mm256_set1_epi32(pair_at(a[i] + 2 * q));
          acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(av, b0));
          acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(av, b1));
        });
      }
    });
    const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
    if (ep.raw_sums && cols == 16 && !g.comp_col) {  // Winograd's M: the sums as they are
      unrolled<MR>([&](auto i) OPTIM_INLINED {
        int32_t* row = static_cast<int32_t*>(g.c) + (m + i) * g.ldc + j0;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), acc[i][0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 8), acc[i][1]);
      });
      continue;
    }
    // A full panel with per-column scales (every conv with per-channel weights) requantizes in registers.
    if (cols == 16 && PanelStore::suits(ep) && !g.comp_col) {
      store_panel<MR>(g, ep, acc, m, j0);
      continue;
    }
    alignas(32) int32_t sums[16];
    unrolled<MR>([&](auto i) OPTIM_INLINED {
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[i][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 8), acc[i][1]);
      if (g.comp_col)
        for (int64_t j = 0; j < cols; ++j) sums[j] += g.comp_col[j0 + j];
      store_row(sums, m + i, j0, cols, ep, g.c, g.ldc);
    });
  }
}

// A last panel of at most 8 columns (C's width 8 more than a multiple of 16): MR <= 12 rows by the panel's first 8
// columns, 12 accumulators, so no vpmaddwd goes to the panel's zero padding; the sums are the 16-wide tile's.
constexpr int kHalfRows = 12;

template <int MR>
void half_tile(const ConvGemmQ8Args& g, int64_t m, int64_t p) {
  const ConvRows& r = g.a;
  const int64_t kp_tap = r.k_tap / 2;
  const int16_t* w = static_cast<const int16_t*>(g.w) + p * r.taps * kp_tap * 32;
  __m256i acc[MR];
  unrolled<MR>([&](auto i) OPTIM_INLINED { acc[i] = _mm256_setzero_si256(); });
  for_each_tap<MR, int16_t>(r, m, [&](const int16_t* const* a) OPTIM_INLINED {
    for (int64_t q = 0; q < kp_tap; ++q, w += 32) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      unrolled<MR>([&](auto i) OPTIM_INLINED {
        acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_set1_epi32(pair_at(a[i] + 2 * q)), b));
      });
    }
  });
  // Copies: C's byte stores may alias what a reference points at, so the epilogue's fields (and C, ldc) would be
  // loaded again, and branched on, for every row.
  const QgemmEpilogue ep = *g.ep;
  void* const c = g.c;
  const int64_t ldc = g.ldc;
  const int32_t* const comp = g.comp_col;
  const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
  alignas(32) int32_t sums[8];
  unrolled<MR>([&](auto i) OPTIM_INLINED {
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[i]);
    if (comp)
      for (int64_t j = 0; j < cols; ++j) sums[j] += comp[j0 + j];
    store_row(sums, m + i, j0, cols, ep, c, ldc);  // 8 columns in registers (store8), fewer one by one
  });
}

using TileFn = void (*)(const ConvGemmQ8Args&, int64_t, int64_t);
using TilesFn = void (*)(const ConvGemmQ8Args&, int64_t, int64_t, int64_t);
constexpr TilesFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};
constexpr TileFn kHalfTiles[kHalfRows + 1] = {nullptr,       half_tile<1>, half_tile<2>,  half_tile<3>, half_tile<4>,
                                              half_tile<5>,  half_tile<6>, half_tile<7>,  half_tile<8>, half_tile<9>,
                                              half_tile<10>, half_tile<11>, half_tile<12>};

}  // namespace

void conv_gemm_s16_avx2_6x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  const bool half_last = p1 > p0 && panel_cols(g.n, p1 - 1) <= 8;
  const int64_t whole_p1 = half_last ? p1 - 1 : p1;
  for_each_conv_row_block(m0, m1, p0, whole_p1, kRows, g.a.taps * g.a.k_tap * 16 * 2,
                          [&](int64_t m, int64_t rows, int64_t q0, int64_t q1) { kTiles[rows](g, m, q0, q1); });
  if (half_last)
    for (int64_t m = m0; m < m1; m += kHalfRows) kHalfTiles[std::min<int64_t>(kHalfRows, m1 - m)](g, m, p1 - 1);
}

}  // namespace optim::kernels
