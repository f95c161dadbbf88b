// AVX-512 direct float convolution (see kernel_table.h, ConvF32Fn): 8 output channels by four segments
// of 8 pixels, two segments per zmm, 16 accumulators. Per tap, four 8-float loads from the prepared
// input and one weight broadcast per channel feed 16 FMAs. Each output is the same chain of FMAs in tap
// order as in the AVX2 kernel. Compiled with -mavx512f (and the VNNI set); only called when the CPU
// reports AVX-512 (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "conv_store_avx2.h"
#include "conv_segment.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8, kSegs = 4;

// Segment a's 8 floats in the low half, b's in the high half (64-bit insert: AVX-512 F, no DQ needed).
inline __m512 two_segments(const float* a, const float* b) {
  const __m512d lo = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(a)));
  return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}

template <int MR>
inline void tile(const ConvF32Args& g, const float* w, const float* const* x, float* out /* MR x 32 */) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < g.k; ++k) {
    const int64_t off = g.tap_off[k];
    const __m512 b0 = two_segments(x[0] + off, x[1] + off);
    const __m512 b1 = two_segments(x[2] + off, x[3] + off);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(w[r * g.ldw + k]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(out + r * 32, c0[r]);
    _mm512_storeu_ps(out + r * 32 + 16, c1[r]);
  }
}

using TileFn = void (*)(const ConvF32Args&, const float*, const float* const*, float*);
constexpr TileFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

}  // namespace

void conv_f32_avx512_8x32(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const ConvF32Args& g) {
  static_assert(kConvSeg == 8, "a segment is half a zmm of floats");
  alignas(64) float acc[kRows * 32];
  for (int64_t s = s0; s < s1; s += kSegs) {
    const int64_t segs = std::min<int64_t>(kSegs, s1 - s);
    ConvSegment seg[kSegs];
    const float* x[kSegs];
    for (int64_t h = 0; h < kSegs; ++h) {
      seg[h] = conv_segment(g.segs, s + std::min(h, segs - 1));  // past the last: the last again, not kept
      x[h] = g.x + seg[h].in;
    }
    for (int64_t i = m0; i < m1; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m1 - i);
      kTiles[rows](g, g.w + i * g.ldw, x, acc);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < segs; ++h)
          store_segment(acc + r * 32 + h * 8, g.c + (i + r) * g.ldc + seg[h].out, i + r, seg[h].cols, *g.ep);
    }
  }
}

}  // namespace optim::kernels
