// AVX2+FMA direct float convolution (see kernel_table.h, ConvF32Fn): 6 output channels by two segments of
// 8 pixels, 12 accumulators. Per tap, one 8-float load per segment straight from the prepared input
// and one weight broadcast per channel feed 12 FMAs; there is no im2col buffer. Compiled with -mavx2
// -mfma; only called when the CPU reports both (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "conv_store_avx2.h"
#include "conv_segment.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 6;

template <int MR>
inline void tile(const ConvF32Args& g, const float* w, const float* x0, const float* x1, float* out /* MR x 16 */) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    c0[r] = _mm256_setzero_ps();
    c1[r] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < g.k; ++k) {
    const int64_t off = g.tap_off[k];
    const __m256 b0 = _mm256_loadu_ps(x0 + off);
    const __m256 b1 = _mm256_loadu_ps(x1 + off);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(w + r * g.ldw + k);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(out + r * 16, c0[r]);
    _mm256_storeu_ps(out + r * 16 + 8, c1[r]);
  }
}

using TileFn = void (*)(const ConvF32Args&, const float*, const float*, const float*, float*);
constexpr TileFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

void conv_f32_avx2_6x16(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const ConvF32Args& g) {
  static_assert(kConvSeg == 8, "a segment is one ymm of floats");
  alignas(32) float acc[kRows * 16];
  for (int64_t s = s0; s < s1; s += 2) {
    const ConvSegment a = conv_segment(g.segs, s);
    const bool pair = s + 1 < s1;
    const ConvSegment b = pair ? conv_segment(g.segs, s + 1) : a;  // a lone last segment: computed twice, kept once
    for (int64_t i = m0; i < m1; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m1 - i);
      kTiles[rows](g, g.w + i * g.ldw, g.x + a.in, g.x + b.in, acc);
      for (int64_t r = 0; r < rows; ++r) {
        store_segment(acc + r * 16, g.c + (i + r) * g.ldc + a.out, i + r, a.cols, *g.ep);
        if (pair) store_segment(acc + r * 16 + 8, g.c + (i + r) * g.ldc + b.out, i + r, b.cols, *g.ep);
      }
    }
  }
}

}  // namespace optim::kernels
