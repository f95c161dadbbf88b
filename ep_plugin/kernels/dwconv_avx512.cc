// AVX-512 depthwise NHWC convolutions (kernel_table.h): per output pixel, its taps inside the input
// (dwconv_taps.h), then 16 channels per zmm, one FMA per tap in tap order; channel tails masked. The int8
// form converts x - x_zero to float (exact) and requantizes through qstore_avx512.h, equal to the scalar
// reference bit for bit. Compiled with -mavx512f -mavx512bw (and the VNNI set).
#include <immintrin.h>

#include <algorithm>

#include "dwconv_taps.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

constexpr int64_t kMaxTaps = 64;  // larger windows go tap list by tap list (see run_pixels)

inline __mmask16 mask_of(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

inline __m512 load_q8(const void* x, bool u8, int64_t i, __mmask16 k, __m512 zero) {
  const __m128i b = _mm_maskz_loadu_epi8(k, static_cast<const uint8_t*>(x) + i);
  const __m512i v = u8 ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);
  return _mm512_sub_ps(_mm512_cvtepi32_ps(v), zero);
}

// Calls body(px) for each output pixel of [m0, m1) with its valid taps.
template <typename Body>
void for_each_pixel(const DwconvGeometry& g, int64_t m0, int64_t m1, Body body) {
  int64_t off[kMaxTaps], tap[kMaxTaps];
  DwconvPixel px{0, 0, 0, 0, off, tap};
  for (int64_t m = m0; m < m1; ++m) {
    dwconv_pixel_taps(g, m, px);
    body(m, px);
  }
}

}  // namespace

void dwconv_f32_avx512(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_f32_scalar(m0, m1, a);
  const ConvF32Epilogue& ep = a.ep;
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  for_each_pixel(g, m0, m1, [&](int64_t m, const DwconvPixel& px) {
    const float* x = a.x + px.img * dwconv_image_stride(g);
    for (int64_t j = 0; j < g.channels; j += 16) {
      const __mmask16 k = mask_of(g.channels - j);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < px.count; ++t)
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + px.off[t] + j), _mm512_maskz_loadu_ps(k, a.w + px.tap[t] * g.channels + j), acc);
      if (ep.bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.bias + j));
      if (ep.residual) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.residual + m * ep.ld_residual + j));
      acc = _mm512_min_ps(hi, _mm512_max_ps(lo, acc));
      _mm512_mask_storeu_ps(a.c + m * a.ldc + j, k, acc);
    }
  });
}

void dwconv_q8_avx512(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_q8_scalar(m0, m1, a);
  const __m512 zero = _mm512_set1_ps(a.x_zero);
  for_each_pixel(g, m0, m1, [&](int64_t m, const DwconvPixel& px) {
    const int64_t image = px.img * dwconv_image_stride(g);
    for (int64_t j = 0; j < g.channels; j += 16) {
      const int64_t cols = std::min<int64_t>(16, g.channels - j);
      const __mmask16 k = mask_of(cols);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < px.count; ++t)
        acc = _mm512_fmadd_ps(load_q8(a.x, a.x_u8, image + px.off[t] + j, k, zero),
                              _mm512_maskz_loadu_ps(k, a.w + px.tap[t] * g.channels + j), acc);
      alignas(64) int32_t sums[16];
      _mm512_store_si512(sums, _mm512_cvtps_epi32(acc));  // exact: integers below 2^24
      if (cols == 16) {
        store16(sums, m, j, *a.ep, a.c, m * a.ldc + j);
      } else {
        for (int64_t c = 0; c < cols; ++c) qgemm_store(sums[c], m, j + c, *a.ep, a.c, m * a.ldc + j + c);
      }
    }
  });
}

}  // namespace optim::kernels
