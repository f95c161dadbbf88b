// The depthwise NHWC driver shared by every SIMD width (dwconv_avx2.cc: 8 channels per ymm,
// dwconv_avx512.cc: 16 per zmm), on a vector traits type V of the including file:
//   V::Reg, V::Mask, V::kLanes; V::mask_of(channels left), V::zero(), V::load(mask, const float*),
//   V::fma(a, b, acc) = a * b + acc.
// Along an output row, pixels whose whole window lies inside the input go several at a time: per tap one
// weight load feeds one FMA per pixel, at offsets fixed for the row; 3x3 (stride 1 or 2), 5x5 and 7x7 (stride
// 1) windows are unrolled at compile time (row_window). Pixels at the edges take their valid taps one by one
// (dwconv_taps.h). Every output sums its taps in the same (ky, kx) order on every path and ISA, so the int8
// forms equal the scalar reference bit for bit. Internal linkage: each ISA's file compiles its own copy
// with its own flags (one shared inline copy could run AVX-512 code on an AVX2 machine).
#pragma once

#include <algorithm>

#include <immintrin.h>

#include "dwconv_taps.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {

constexpr int64_t kDwMaxTaps = 64;  // larger windows go to the scalar kernel
constexpr int kDwPixels = 4;        // pixels per step of the general in-row loop
// Inputs from this size on prefetch the next output row's new input rows. Smaller ones are a band its thread has
// just written (the int8 forms' x - zero rows, a block's expanded rows) or fit in L2: there the prefetches only
// cost issue slots (8-10% of the int8 3x3 band kernel on Zen 3).
constexpr int64_t kDwPrefetchBytes = int64_t{1} << 20;

// Where the input lies, for prefetching only (load_x reads it): its first byte and bytes per element.
struct DwInput {
  const uint8_t* base;
  int64_t elem;
};

// Horizontal stride S, no dilation, a KH x KW window: pixels [ox, ox_end) of one output row whose
// windows lie inside the input row, P at a time, loading each input pixel once for the outputs that read
// it (up to KW / S).
template <typename V, int KH, int KW, int S, int P, typename LoadX, typename Finish>
void dw_row_window(const DwconvGeometry& g, DwInput x, const float* w, int64_t image, int64_t iy0, int64_t m_row, int64_t ox,
                   int64_t ox_end, LoadX load_x, Finish finish) {
  if (ox + P > ox_end) return;
  bool row_ok[KH];
  unrolled<KH>([&](auto ky) { row_ok[ky] = iy0 + ky >= 0 && iy0 + ky < g.h; });
  // On a large input the last kernel row also asks for the S rows the next output row will add: read once from
  // memory here, they are in cache when needed (large feature maps stream from DRAM otherwise).
  const int64_t pixel_bytes = g.cs * x.elem, row_bytes = g.w * pixel_bytes;
  const bool next_ok = g.h * row_bytes >= kDwPrefetchBytes && iy0 + KH - 1 + S < g.h;
  using Weights = typename V::Reg[KH][KW];
  auto load_weights = [&](int64_t j, typename V::Mask k, Weights& wv) {
    unrolled<KH>([&](auto ky) { unrolled<KW>([&](auto kx) { wv[ky][kx] = V::load(k, w + (ky * KW + kx) * g.channels + j); }); });
  };
  // P pixels from output column o, channels [j, j + lanes).
  auto pixels = [&](int64_t o, int64_t j, typename V::Mask k, const Weights& wv) {
    const int64_t x0 = o * S - g.pw;
    typename V::Reg acc[P];
    unrolled<P>([&](auto p) { acc[p] = V::zero(); });
    unrolled<KH>([&](auto ky) {
      if (!row_ok[ky]) return;
      const int64_t row = image + ((iy0 + ky) * g.w + x0) * g.cs;
      constexpr bool kPrefetch = decltype(ky)::value == KH - 1;
      // The next output row's first new input row (and, at stride 2, the one before it), from this pixel on.
      const char* ahead =
          kPrefetch && next_ok ? reinterpret_cast<const char*>(x.base) + (row + g.w * g.cs + j) * x.elem : nullptr;
      unrolled<(P - 1) * S + KW>([&](auto c) {
        if (kPrefetch && next_ok) {
          const char* at = ahead + c * pixel_bytes;
          _mm_prefetch(at + (S - 1) * row_bytes, _MM_HINT_T0);
          if constexpr (S == 2) _mm_prefetch(at, _MM_HINT_T0);
        }
        const typename V::Reg v = load_x(row + c * g.cs, j, k);
        unrolled<P>([&](auto p) {
          constexpr int kx = decltype(c)::value - S * decltype(p)::value;
          if constexpr (kx >= 0 && kx < KW) acc[p] = V::fma(v, wv[ky][kx], acc[p]);
        });
      });
    });
    unrolled<P>([&](auto p) { finish(m_row + o + p, j, k, acc[p]); });
  };
  Weights wv;
  if constexpr (S == 1) {  // each channel block walks the row with its weights in registers
    for (int64_t j = 0; j < g.channels; j += V::kLanes) {
      const typename V::Mask k = V::mask_of(g.channels - j);
      load_weights(j, k, wv);
      for (int64_t o = ox; o + P <= ox_end; o += P) pixels(o, j, k, wv);
    }
  } else {  // strided: all channels of P pixels before the next ones (measured faster: fewer rows in flight)
    for (int64_t o = ox; o + P <= ox_end; o += P)
      for (int64_t j = 0; j < g.channels; j += V::kLanes) {
        const typename V::Mask k = V::mask_of(g.channels - j);
        load_weights(j, k, wv);
        pixels(o, j, k, wv);
      }
  }
}

// Walks output pixels [m0, m1): sum(taps, load_x(offset from the image's first value, channel, mask) *
// weight row of the tap) for each channel block, then finish(m, first channel, mask, sums).
template <typename V, typename LoadX, typename Finish>
void dw_drive(const DwconvGeometry& geometry, DwInput x, const float* w, int64_t m0, int64_t m1, LoadX load_x,
              Finish finish) {
  // A copy: the outputs' byte stores may alias what a reference points at, so its fields would be loaded again
  // after every store (the row windows take it by reference: a copy there measured slower on Zen 3).
  const DwconvGeometry g = geometry;
  using Reg = typename V::Reg;
  int64_t off[kDwMaxTaps], tap[kDwMaxTaps], row_off[kDwMaxTaps], row_tap[kDwMaxTaps];
  DwconvPixel px{0, 0, 0, 0, off, tap};
  const int64_t pixels = g.oh * g.ow;
  // Output columns whose window lies inside the input row: [ox_lo, ox_hi).
  const int64_t ox_lo = std::min(g.ow, (g.pw + g.sw - 1) / g.sw);
  const int64_t last = g.w - 1 - (g.kw - 1) * g.dw + g.pw;
  const int64_t ox_hi = std::max(ox_lo, last < 0 ? 0 : std::min(g.ow, last / g.sw + 1));
  // One pixel (at an edge, or of a run too short for the paths below), its valid taps one by one. Four channel
  // blocks at a time: four independent sums per tap, where one block's sum alone waits on each FMA's latency.
  auto one = [&](int64_t m) {
    dwconv_pixel_taps(g, m, px);
    const int64_t image = px.img * dwconv_image_stride(g);
    int64_t j = 0;
    constexpr int kBlocks = 4;
    const typename V::Mask all = V::mask_of(V::kLanes);
    for (; j + kBlocks * V::kLanes <= g.channels; j += kBlocks * V::kLanes) {
      Reg acc[kBlocks];
      unrolled<kBlocks>([&](auto b) { acc[b] = V::zero(); });
      for (int64_t t = 0; t < px.count; ++t) {
        const float* wt = w + px.tap[t] * g.channels + j;
        const int64_t at = image + px.off[t];
        unrolled<kBlocks>([&](auto b) {
          acc[b] = V::fma(load_x(at, j + b * V::kLanes, all), V::load(all, wt + b * V::kLanes), acc[b]);
        });
      }
      unrolled<kBlocks>([&](auto b) { finish(m, j + b * V::kLanes, all, acc[b]); });
    }
    for (; j < g.channels; j += V::kLanes) {
      const typename V::Mask k = V::mask_of(g.channels - j);
      Reg acc = V::zero();
      for (int64_t t = 0; t < px.count; ++t) acc = V::fma(load_x(image + px.off[t], j, k), V::load(k, w + px.tap[t] * g.channels + j), acc);
      finish(m, j, k, acc);
    }
  };
  for (int64_t m = m0; m < m1;) {
    const int64_t img = m / pixels, oy = m % pixels / g.ow, ox = m % g.ow;
    const int64_t run_end = std::min(m1, m + (ox < ox_lo ? ox_lo - ox : ox < ox_hi ? ox_hi - ox : g.ow - ox));
    if (ox < ox_lo || ox >= ox_hi || run_end - m < kDwPixels) {
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
    // 3x3 at stride 1 or 2, 5x5 and 7x7 at stride 1 (5x5 at stride 2 measured no faster than the loop below).
    const bool w3 = g.kh == 3 && g.kw == 3 && (g.sw == 1 || g.sw == 2), w5 = g.kh == 5 && g.kw == 5 && g.sw == 1;
    const bool w7 = g.kh == 7 && g.kw == 7 && g.sw == 1;
    if ((w3 || w5 || w7) && g.dw == 1 && g.dh == 1) {
      // Eight pixels per step (more independent sums in flight), then four, then one at a time (the
      // general path below would re-derive each tap's offset per pixel).
      const int64_t m_row = m - ox, n8 = (run_end - m) / 8 * 8, n4 = (run_end - m - n8) / 4 * 4;
      auto rows = [&](auto kernel8, auto kernel4, auto kernel1) {
        kernel8(g, x, w, image, y0, m_row, ox, ox + n8, load_x, finish);
        kernel4(g, x, w, image, y0, m_row, ox + n8, ox + n8 + n4, load_x, finish);
        kernel1(g, x, w, image, y0, m_row, ox + n8 + n4, ox + (run_end - m), load_x, finish);
      };
      using LX = decltype(load_x);
      using FN = decltype(finish);
      if (g.kh == 3 && g.sw == 1)
        rows(dw_row_window<V, 3, 3, 1, 8, LX, FN>, dw_row_window<V, 3, 3, 1, 4, LX, FN>, dw_row_window<V, 3, 3, 1, 1, LX, FN>);
      else if (g.kh == 3)
        rows(dw_row_window<V, 3, 3, 2, 8, LX, FN>, dw_row_window<V, 3, 3, 2, 4, LX, FN>, dw_row_window<V, 3, 3, 2, 1, LX, FN>);
      else if (g.kh == 5) rows(dw_row_window<V, 5, 5, 1, 8, LX, FN>, dw_row_window<V, 5, 5, 1, 4, LX, FN>, dw_row_window<V, 5, 5, 1, 1, LX, FN>);
      else  // 7x7 (ConvNeXt): four pixels a step on both passes; eight spill their sums and ran slower
        rows(dw_row_window<V, 7, 7, 1, 4, LX, FN>, dw_row_window<V, 7, 7, 1, 4, LX, FN>, dw_row_window<V, 7, 7, 1, 1, LX, FN>);
      m = run_end;
    }
    for (; m + kDwPixels <= run_end; m += kDwPixels) {
      const int64_t x0 = (m % g.ow) * g.sw - g.pw;
      for (int64_t j = 0; j < g.channels; j += V::kLanes) {
        const typename V::Mask k = V::mask_of(g.channels - j);
        Reg acc[kDwPixels];
        for (int p = 0; p < kDwPixels; ++p) acc[p] = V::zero();
        for (int64_t t = 0; t < count; ++t) {
          const Reg wv = V::load(k, w + row_tap[t] * g.channels + j);
          const int64_t base = image + row_off[t] + x0 * g.cs;
          for (int p = 0; p < kDwPixels; ++p) acc[p] = V::fma(load_x(base + p * g.sw * g.cs, j, k), wv, acc[p]);
        }
        for (int p = 0; p < kDwPixels; ++p) finish(m + p, j, k, acc[p]);
      }
    }
    for (; m < run_end; ++m) one(m);
  }
}

}  // namespace
}  // namespace optim::kernels
