// AVX2 NHWC convolution GEMM on float32 (kernel_table.h, ConvGemmF32Args): 6 output pixels by one
// 16-column panel, 12 ymm accumulators; per K value two panel loads and one broadcast per pixel feed 12
// FMAs, the pixels' row pointers moving by tap; a last panel of at most 8 columns on 12 pixels by 8 columns
// (half_tile). The epilogue runs in registers; other panels cut by C's edge go through the scalar epilogue.
// Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "conv_f32_epilogue.h"
#include "conv_rows.h"
#include "math_avx2.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 6;

// Rows m..m+MR-1 of C from column j0, `width` columns, in registers: store(i, finish, row i of C, bias, row i of
// the residual), the epilogue's parameters held in locals once (ConvEpilogue256) for all the tile's stores; a
// SiLU after them, on the stored block (silu_block).
template <int MR, typename Store>
OPTIM_INLINED inline void store_rows(const ConvGemmF32Args& g, int64_t m, int64_t j0, int64_t width, const Store& store) {
  const ConvF32Epilogue& ep = g.ep;
  const ConvEpilogue256 finish(ep, true);
  const float* bias = ep.bias ? ep.bias + j0 : nullptr;
  const float* res = ep.residual ? ep.residual + m * ep.ld_residual + j0 : nullptr;
  const int64_t ld_res = ep.ld_residual, ldc = g.ldc;
  float* out = g.c + m * ldc + j0;
  unrolled<MR>([&](auto i) OPTIM_INLINED { store(i, finish, out + i * ldc, bias, res ? res + i * ld_res : nullptr); });
  if (ep.has_act && !finish.has_act) silu_block(out, ldc, MR, width);
}

// Rows m..m+MR-1 by panels [p0, p1), one panel after the other: the rows' bases and the clamp found once for them
// all (per tile, with the call, they cost ~10% of a K = 16 tile's time on AMD Zen).
template <int MR>
void tile(const ConvGemmF32Args& g, int64_t m, int64_t p0, int64_t p1) {
  const ConvRows& r = g.a;
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const ConvF32Epilogue& ep = g.ep;
  // The usual epilogue (a bias, a clamp, nothing else) with no test per store; any other through store_rows.
  const bool plain = ep.bias && !ep.residual && !ep.has_act;
  const __m256 lo = _mm256_set1_ps(ep.lo), hi = _mm256_set1_ps(ep.hi);
  const int64_t ldc = g.ldc;
  for (int64_t p = p0; p < p1; ++p) {
    const float* w = g.w + p * r.taps * r.k_tap * 16;
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_setzero_ps();
      c1[i] = _mm256_setzero_ps();
    }
    // The K loop, with (on the last panel) or without the prefetch of the next tile's rows: a line per row every 16
    // values, once per row block, as in conv_gemm_f32_avx512.cc. Two loops, not a test per K step (7% of a K = 16 tile).
    auto k_loop = [&](auto prefetch) OPTIM_INLINED {
      for_each_tap<MR, float>(r, base, [&](const float* const* a) OPTIM_INLINED {
        for (int64_t c = 0; c < r.k_tap; ++c, w += 16) {
          if (decltype(prefetch)::value && (c & 15) == 0) {
#pragma GCC unroll 6
            for (int i = 0; i < MR; ++i) _mm_prefetch(reinterpret_cast<const char*>(a[i] + c + MR * r.cs), _MM_HINT_T0);
          }
          const __m256 b0 = _mm256_loadu_ps(w), b1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 6
          for (int i = 0; i < MR; ++i) {
            const __m256 av = _mm256_broadcast_ss(a[i] + c);
            c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
          }
        }
      });
    };
    if ((p + 1) * 16 >= g.n) k_loop(std::true_type{});
    else k_loop(std::false_type{});
    const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
    if (cols == 16 && plain) {
      float* out = g.c + m * ldc + j0;
      const __m256 bias0 = _mm256_loadu_ps(ep.bias + j0), bias1 = _mm256_loadu_ps(ep.bias + j0 + 8);
      unrolled<MR>([&](auto i) OPTIM_INLINED {  // NaN stays (second operand), as ConvEpilogue256
        _mm256_storeu_ps(out + i * ldc, _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(c0[i], bias0))));
        _mm256_storeu_ps(out + i * ldc + 8, _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(c1[i], bias1))));
      });
    } else if (cols == 16) {
      store_rows<MR>(g, m, j0, 16, [&](auto i, const ConvEpilogue256& finish, float* out, const float* bias, const float* res) OPTIM_INLINED {
        _mm256_storeu_ps(out, finish(c0[i], bias, res));
        _mm256_storeu_ps(out + 8, finish(c1[i], bias ? bias + 8 : nullptr, res ? res + 8 : nullptr));
      });
    } else {
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        alignas(32) float acc[16];
        _mm256_store_ps(acc, c0[i]);
        _mm256_store_ps(acc + 8, c1[i]);
        conv_f32_store_scalar(acc, cols, m + i, j0, g.c, g.ldc, ep);
      }
    }
  }
}

// A last panel of at most 8 columns (C's width 8 more than a multiple of 16: 24, 40, 72, 88... channels): MR <= 12
// rows by the panel's first 8 columns, 12 accumulators, so none of the 16-wide tile's multiply-adds go to the
// panel's zero padding. Each sum takes its products in the 16-wide tile's order: the same bits.
constexpr int kHalfRows = 12;

template <int MR>
void half_tile(const ConvGemmF32Args& g, int64_t m, int64_t p) {
  const ConvRows& r = g.a;
  const float* w = g.w + p * r.taps * r.k_tap * 16;
  __m256 c[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) c[i] = _mm256_setzero_ps();
  for_each_tap<MR, float>(r, m, [&](const float* const* a) OPTIM_INLINED {
    for (int64_t k = 0; k < r.k_tap; ++k, w += 16) {
      const __m256 b = _mm256_loadu_ps(w);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) c[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(a[i] + k), b, c[i]);
    }
  });
  const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
  const ConvF32Epilogue& ep = g.ep;
  if (cols == 8) {
    store_rows<MR>(g, m, j0, 8, [&](auto i, const ConvEpilogue256& finish, float* out, const float* bias, const float* res) OPTIM_INLINED {
      _mm256_storeu_ps(out, finish(c[i], bias, res));
    });
    return;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    alignas(32) float acc[8];
    _mm256_store_ps(acc, c[i]);
    conv_f32_store_scalar(acc, cols, m + i, j0, g.c, g.ldc, ep);
  }
}

using TileFn = void (*)(const ConvGemmF32Args&, int64_t, int64_t);
using TilesFn = void (*)(const ConvGemmF32Args&, int64_t, int64_t, int64_t);
constexpr TilesFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};
constexpr TileFn kHalfTiles[kHalfRows + 1] = {nullptr,       half_tile<1>, half_tile<2>,  half_tile<3>, half_tile<4>,
                                              half_tile<5>,  half_tile<6>, half_tile<7>,  half_tile<8>, half_tile<9>,
                                              half_tile<10>, half_tile<11>, half_tile<12>};

}  // namespace

void conv_gemm_f32_avx2_6x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmF32Args& g) {
  const bool half_last = p1 > p0 && panel_cols(g.n, p1 - 1) <= 8;
  const int64_t whole_p1 = half_last ? p1 - 1 : p1;
  for_each_conv_row_block(m0, m1, p0, whole_p1, kRows, g.a.taps * g.a.k_tap * 16 * 4,
                          [&](int64_t m, int64_t rows, int64_t q0, int64_t q1) { kTiles[rows](g, m, q0, q1); });
  if (half_last)
    for (int64_t m = m0; m < m1; m += kHalfRows) kHalfTiles[std::min<int64_t>(kHalfRows, m1 - m)](g, m, p1 - 1);
}

}  // namespace optim::kernels
