// AVX-512 VNNI direct int8 convolution (see kernel_table.h, u8 x s8 quads) with a 16x8 tile: 16 output
// channels by one segment of 8 output pixels, in ymm registers (AVX-512 VL: 32 of them). Per K quad the
// four taps' 8 pixels (uint8) are loaded from the prepared input and interleaved into per-pixel quads;
// one vpdpbusd per channel adds its four u8 x s8 products into int32 (exact, no intermediate
// saturation). The zero-point compensation is added before the shared AVX2 epilogue, so results equal
// the scalar reference bit for bit. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni; only
// called when the CPU reports them (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_segment.h"
#include "qstore_avx2.h"

namespace optim::kernels {
namespace {

inline __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// Requantizes 8 int32 sums of row i with a per-row scale and bias (the usual conv epilogue) and stores
// the 8 bytes: store8's operations, in registers.
inline void requantize_row(__m256i acc, int64_t i, const QgemmEpilogue& ep, uint8_t* dst) {
  __m256 real = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(ep.scale_row[i]));
  if (ep.bias_row) real = _mm256_add_ps(real, _mm256_set1_ps(ep.bias_row[i]));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), bytes8(quantize8(real, ep), ep));
}

// The tile's sums go to `out` (MR x 8 int32), or, with `direct` (8 pixels, a quantized output with
// per-row scales), straight through requantize_row into C's rows i0.. at column j0.
template <int MR>
inline void tile(const QconvArgs& g, const int8_t* a, const uint8_t* x, int32_t* out, bool direct, int64_t i0, int64_t j0) {
  __m256i acc[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_set1_epi32(g.comp_row ? g.comp_row[r] : 0);
  const int64_t* off = g.tap_off;
  for (int64_t q = 0; q < g.kg; ++q) {
    const __m128i t01 = _mm_unpacklo_epi8(load8(x + off[4 * q]), load8(x + off[4 * q + 1]));
    const __m128i t23 = _mm_unpacklo_epi8(load8(x + off[4 * q + 2]), load8(x + off[4 * q + 3]));
    const __m256i b = _mm256_set_m128i(_mm_unpackhi_epi16(t01, t23), _mm_unpacklo_epi16(t01, t23));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * g.lda + 4 * q, sizeof(quad));
      acc[r] = _mm256_dpbusd_epi32(acc[r], b, _mm256_set1_epi32(quad));
    }
  }
  if (direct) {
    uint8_t* c = static_cast<uint8_t*>(g.c) + i0 * g.ldc + j0;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) requantize_row(acc[r], i0 + r, *g.ep, c + r * g.ldc);
    return;
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 8), acc[r]);
}

using TileFn = void (*)(const QconvArgs&, const int8_t*, const uint8_t*, int32_t*, bool, int64_t, int64_t);
constexpr TileFn kTiles[kQconvU8S8MR + 1] = {nullptr,   tile<1>,  tile<2>,  tile<3>,  tile<4>,  tile<5>,
                                             tile<6>,   tile<7>,  tile<8>,  tile<9>,  tile<10>, tile<11>,
                                             tile<12>,  tile<13>, tile<14>, tile<15>, tile<16>};

}  // namespace

void qconv_u8s8_avx512vnni_16x8(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const QconvArgs& g) {
  static_assert(kConvSeg == 8, "the tile's pixels are one ymm of int32");
  alignas(32) int32_t acc[kQconvU8S8MR * kConvSeg];
  const QgemmEpilogue& ep = *g.ep;
  const bool quantized_rows = ep.out != QuantOut::kFloat32 && ep.scale_row && !ep.scale_col && !ep.bias_col;
  for_each_conv_tile<kQconvU8S8MR>(g.segs, m0, m1, s0, s1, [&](const ConvSegment& seg, int64_t i, int64_t rows) {
    QconvArgs gi = g;
    gi.comp_row = g.comp_row ? g.comp_row + i : nullptr;
    const bool direct = quantized_rows && seg.cols == kConvSeg;
    kTiles[rows](gi, static_cast<const int8_t*>(g.a) + i * g.lda, static_cast<const uint8_t*>(g.x) + seg.in, acc, direct,
                 i, seg.out);
    if (!direct)
      for (int64_t r = 0; r < rows; ++r) store_row(acc + r * kConvSeg, i + r, seg.out, seg.cols, ep, g.c, g.ldc);
  });
}

}  // namespace optim::kernels
