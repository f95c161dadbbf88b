// AVX2 direct int8 convolution (see kernel_table.h) with an 8x8 tile: 8 output channels by one segment
// of 8 output pixels. Per K pair the two taps' 8 pixels are loaded straight from the prepared input and
// interleaved into (even, odd) int16 pairs, then one vpmaddwd per channel sums them exactly into int32;
// there is no im2col buffer. The epilogue is qstore_avx2.h's, so results equal the scalar
// reference bit for bit. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_segment.h"
#include "qstore_avx2.h"

namespace optim::kernels {
namespace {

template <int MR>
inline void tile(const QconvArgs& g, const int16_t* a, const int16_t* x, int32_t* out /* MR x 8 */) {
  __m256i acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_si256();
  const int64_t* off = g.tap_off;
  for (int64_t q = 0; q < g.kg; ++q) {
    const __m128i t0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + off[2 * q]));
    const __m128i t1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + off[2 * q + 1]));
    const __m256i b = _mm256_set_m128i(_mm_unpackhi_epi16(t0, t1), _mm_unpacklo_epi16(t0, t1));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * g.lda + 2 * q, sizeof(pair));
      acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_set1_epi32(pair), b));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 8), acc[r]);
}

using TileFn = void (*)(const QconvArgs&, const int16_t*, const int16_t*, int32_t*);
constexpr TileFn kTiles[kQconvS16MR + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

}  // namespace

void qconv_s16_avx2_8x8(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const QconvArgs& g) {
  static_assert(kConvSeg == 8 && kQconvS16MR == 8, "the tile is one ymm of 8 pixels by 8 channels");
  alignas(32) int32_t acc[kQconvS16MR * kConvSeg];
  for_each_conv_tile<kQconvS16MR>(g.segs, m0, m1, s0, s1, [&](const ConvSegment& seg, int64_t i, int64_t rows) {
    kTiles[rows](g, static_cast<const int16_t*>(g.a) + i * g.lda, static_cast<const int16_t*>(g.x) + seg.in, acc);
    for (int64_t r = 0; r < rows; ++r) store_row(acc + r * kConvSeg, i + r, seg.out, seg.cols, *g.ep, g.c, g.ldc);
  });
}

}  // namespace optim::kernels
