// AVX2 depthwise NHWC convolutions (kernel_table.h): per output pixel, its taps inside the input
// (dwconv_taps.h), then 8 channels per ymm, one FMA per tap in tap order; the channels past the last
// multiple of 8 go one at a time. The int8 form sums exact integers in float32 and requantizes through
// qstore_avx2.h, equal to the scalar reference bit for bit. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_f32_epilogue.h"
#include "dwconv_taps.h"
#include "math_avx2.h"
#include "qstore_avx2.h"

namespace optim::kernels {
namespace {

constexpr int64_t kMaxTaps = 64;

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

void dwconv_f32_avx2(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_f32_scalar(m0, m1, a);
  const ConvF32Epilogue& ep = a.ep;
  const __m256 lo = _mm256_set1_ps(ep.lo), hi = _mm256_set1_ps(ep.hi);
  for_each_pixel(g, m0, m1, [&](int64_t m, const DwconvPixel& px) {
    const float* x = a.x + px.img * dwconv_image_stride(g);
    int64_t j = 0;
    for (; j + 8 <= g.channels; j += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t t = 0; t < px.count; ++t)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + px.off[t] + j), _mm256_loadu_ps(a.w + px.tap[t] * g.channels + j), acc);
      if (ep.bias) acc = _mm256_add_ps(acc, _mm256_loadu_ps(ep.bias + j));
      if (ep.residual) acc = _mm256_add_ps(acc, _mm256_loadu_ps(ep.residual + m * ep.ld_residual + j));
      acc = _mm256_min_ps(hi, _mm256_max_ps(lo, acc));
      if (ep.has_act) acc = activation256(ep.act, ep.act_params, acc);
      _mm256_storeu_ps(a.c + m * a.ldc + j, acc);
    }
    if (j == g.channels) return;
    float acc[8];
    for (int64_t c = j; c < g.channels; ++c) {
      float s = 0.f;
      for (int64_t t = 0; t < px.count; ++t) s = std::fma(x[px.off[t] + c], a.w[px.tap[t] * g.channels + c], s);
      acc[c - j] = s;
    }
    conv_f32_store_scalar(acc, g.channels - j, m, j, a.c, a.ldc, ep);
  });
}

void dwconv_q8_avx2(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_q8_scalar(m0, m1, a);
  for_each_pixel(g, m0, m1, [&](int64_t m, const DwconvPixel& px) {
    const float* x = a.x + px.img * dwconv_image_stride(g);
    int64_t j = 0;
    for (; j + 8 <= g.channels; j += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t t = 0; t < px.count; ++t)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + px.off[t] + j), _mm256_loadu_ps(a.w + px.tap[t] * g.channels + j), acc);
      alignas(32) int32_t sums[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums), _mm256_cvtps_epi32(acc));  // exact integers
      store8(sums, m, j, *a.ep, a.c, m * a.ldc + j);
    }
    for (; j < g.channels; ++j) {
      float s = 0.f;
      for (int64_t t = 0; t < px.count; ++t)
        s += x[px.off[t] + j] * a.w[px.tap[t] * g.channels + j];
      qgemm_store(static_cast<int32_t>(s), m, j, *a.ep, a.c, m * a.ldc + j);
    }
  });
}

}  // namespace optim::kernels
