// AVX-512 depthwise NHWC convolutions (kernel_table.h), 16 channels per zmm, channel tails masked. Along
// an output row, pixels whose whole window lies inside the input go four at a time: per tap one weight
// load feeds four FMAs, at offsets fixed for the row. Pixels at the edges take their valid taps one by
// one (dwconv_taps.h). Every output sums its taps in the same (tap) order either way. The int8 form
// converts x - x_zero to float (exact) and requantizes through qstore_avx512.h, equal to the scalar
// reference bit for bit. Compiled with -mavx512f -mavx512bw (and the VNNI set).
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "dwconv_taps.h"
#include "math_avx512.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

constexpr int64_t kMaxTaps = 64;  // larger windows go to the scalar kernel
constexpr int kPixels = 4;

inline __mmask16 mask_of(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// Calls f(std::integral_constant<int, I>) for I = 0 .. N-1, unrolled at compile time: the register arrays
// below are indexed by constants only, or GCC keeps them on the stack.
template <typename F, int... I>
inline __attribute__((always_inline)) void unrolled(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
inline __attribute__((always_inline)) void unrolled(F&& f) {
  unrolled(f, std::make_integer_sequence<int, N>{});
}

// Horizontal stride S, no dilation, a KH x KW window: pixels [ox, ox_end) of one output row whose
// windows lie inside the input row, P at a time. Per 16-channel block and kernel row, the row's KW
// weights are loaded once and each input pixel once for the outputs that read it (up to KW / S); every
// output still sums its taps in (ky, kx) order, as the other paths do. Channels inside the pixel loop keep
// the reads sequential.
template <int KH, int KW, int S, int P, typename LoadX, typename Finish>
void row_window(const DwconvGeometry& g, const float* w, int64_t image, int64_t iy0, int64_t m_row, int64_t ox,
                 int64_t ox_end, LoadX load_x, Finish finish) {
  bool row_ok[KH];
  unrolled<KH>([&](auto ky) { row_ok[ky] = iy0 + ky >= 0 && iy0 + ky < g.h; });
  for (int64_t o = ox; o + P <= ox_end; o += P) {
    const int64_t x0 = o * S - g.pw;
    for (int64_t j = 0; j < g.channels; j += 16) {
      const __mmask16 k = mask_of(g.channels - j);
      __m512 acc[P];
      unrolled<P>([&](auto p) { acc[p] = _mm512_setzero_ps(); });
      unrolled<KH>([&](auto ky) {
        if (!row_ok[ky]) return;
        __m512 wv[KW];
        unrolled<KW>([&](auto kx) { wv[kx] = _mm512_maskz_loadu_ps(k, w + (ky * KW + kx) * g.channels + j); });
        const int64_t row = image + ((iy0 + ky) * g.w + x0) * g.cs;
        unrolled<(P - 1) * S + KW>([&](auto c) {
          const __m512 v = load_x(row + c * g.cs, j, k);
          unrolled<P>([&](auto p) {
            constexpr int kx = decltype(c)::value - S * decltype(p)::value;
            if constexpr (kx >= 0 && kx < KW) acc[p] = _mm512_fmadd_ps(v, wv[kx], acc[p]);
          });
        });
      });
      unrolled<P>([&](auto p) { finish(m_row + o + p, j, k, acc[p]); });
    }
  }
}

// Walks output pixels [m0, m1): sum(taps, load_x(offset from the image's first value, channel, mask) *
// weight row of the tap) for each 16-channel block, then finish(m, first channel, mask, sums).
template <typename LoadX, typename Finish>
void drive(const DwconvGeometry& g, const float* w, int64_t m0, int64_t m1, LoadX load_x, Finish finish) {
  int64_t off[kMaxTaps], tap[kMaxTaps], row_off[kMaxTaps], row_tap[kMaxTaps];
  DwconvPixel px{0, 0, 0, 0, off, tap};
  const int64_t pixels = g.oh * g.ow;
  // Output columns whose window lies inside the input row: [ox_lo, ox_hi).
  const int64_t ox_lo = std::min(g.ow, (g.pw + g.sw - 1) / g.sw);
  const int64_t last = g.w - 1 - (g.kw - 1) * g.dw + g.pw;
  const int64_t ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  auto one = [&](int64_t m) {
    dwconv_pixel_taps(g, m, px);
    const int64_t image = px.img * dwconv_image_stride(g);
    for (int64_t j = 0; j < g.channels; j += 16) {
      const __mmask16 k = mask_of(g.channels - j);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t t = 0; t < px.count; ++t)
        acc = _mm512_fmadd_ps(load_x(image + px.off[t], j, k), _mm512_maskz_loadu_ps(k, w + px.tap[t] * g.channels + j), acc);
      finish(m, j, k, acc);
    }
  };
  for (int64_t m = m0; m < m1;) {
    const int64_t img = m / pixels, oy = m % pixels / g.ow, ox = m % g.ow;
    const int64_t run_end = std::min(m1, m + (ox < ox_lo ? ox_lo - ox : ox < ox_hi ? ox_hi - ox : g.ow - ox));
    if (ox < ox_lo || ox >= ox_hi || run_end - m < kPixels) {
      for (; m < run_end; ++m) one(m);
      continue;
    }
    // Inside the row: the valid kernel rows, and each tap's offset from the pixel's window corner.
    int64_t count = 0;
    const int64_t y0 = oy * g.sh - g.ph;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = y0 + ky * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx, ++count) {
        row_off[count] = (iy * g.w + kx * g.dw) * g.cs;
        row_tap[count] = ky * g.kw + kx;
      }
    }
    const int64_t image = img * dwconv_image_stride(g);
    // 3x3 at stride 1 or 2, 5x5 at stride 1 (5x5 at stride 2 measured no faster than the loop below).
    const bool w3 = g.kh == 3 && g.kw == 3 && (g.sw == 1 || g.sw == 2), w5 = g.kh == 5 && g.kw == 5 && g.sw == 1;
    if ((w3 || w5) && g.dw == 1 && g.dh == 1) {
      // Eight pixels per step (more independent sums in flight), then four.
      const int64_t m_row = m - ox, n8 = (run_end - m) / 8 * 8, n4 = (run_end - m - n8) / 4 * 4;
      auto rows = [&](auto kernel8, auto kernel4) {
        kernel8(g, w, image, y0, m_row, ox, ox + n8, load_x, finish);
        kernel4(g, w, image, y0, m_row, ox + n8, ox + n8 + n4, load_x, finish);
      };
      using LX = decltype(load_x);
      using FN = decltype(finish);
      if (g.kh == 3 && g.sw == 1) rows(row_window<3, 3, 1, 8, LX, FN>, row_window<3, 3, 1, 4, LX, FN>);
      else if (g.kh == 3) rows(row_window<3, 3, 2, 8, LX, FN>, row_window<3, 3, 2, 4, LX, FN>);
      else rows(row_window<5, 5, 1, 8, LX, FN>, row_window<5, 5, 1, 4, LX, FN>);
      m += n8 + n4;
    }
    for (; m + kPixels <= run_end; m += kPixels) {
      const int64_t x0 = (m % g.ow) * g.sw - g.pw;
      for (int64_t j = 0; j < g.channels; j += 16) {
        const __mmask16 k = mask_of(g.channels - j);
        __m512 acc[kPixels];
        for (int p = 0; p < kPixels; ++p) acc[p] = _mm512_setzero_ps();
        for (int64_t t = 0; t < count; ++t) {
          const __m512 wv = _mm512_maskz_loadu_ps(k, w + row_tap[t] * g.channels + j);
          const int64_t base = image + row_off[t] + x0 * g.cs;
          for (int p = 0; p < kPixels; ++p)
            acc[p] = _mm512_fmadd_ps(load_x(base + p * g.sw * g.cs, j, k), wv, acc[p]);
        }
        for (int p = 0; p < kPixels; ++p) finish(m + p, j, k, acc[p]);
      }
    }
    for (; m < run_end; ++m) one(m);
  }
}

}  // namespace

void dwconv_f32_avx512(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_f32_scalar(m0, m1, a);
  const ConvF32Epilogue& ep = a.ep;
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  drive(
      g, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) { return _mm512_maskz_loadu_ps(k, a.x + i + j); },
      [&](int64_t m, int64_t j, __mmask16 k, __m512 acc) {
        if (ep.bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.bias + j));
        if (ep.residual) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.residual + m * ep.ld_residual + j));
        acc = _mm512_min_ps(hi, _mm512_max_ps(lo, acc));  // NaN stays (second operand)
        if (ep.has_act) acc = activation512(ep.act, ep.act_params, acc);
        _mm512_mask_storeu_ps(a.c + m * a.ldc + j, k, acc);
      });
}

void dwconv_q8_avx512(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kMaxTaps) return dwconv_q8_scalar(m0, m1, a);
  drive(
      g, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) { return _mm512_maskz_loadu_ps(k, a.x + i + j); },
      [&](int64_t m, int64_t j, __mmask16 k, __m512 acc) {
        // The sums are exact integers below 2^24: converting them to int32 is exact too.
        const __m512 scale = _mm512_maskz_loadu_ps(k, a.ep->scale_col + j);
        const float* bias = a.ep->bias_col ? a.ep->bias_col + j : nullptr;
        requantize16(acc, scale, bias, k, *a.ep, a.c, m * a.ldc + j);
      });
}

}  // namespace optim::kernels
