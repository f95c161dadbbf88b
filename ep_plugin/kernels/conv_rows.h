// Where the rows of an NHWC convolution GEMM start (kernel_table.h, ConvRows): shared by every ISA's
// kernel so that they read the same pixels. One division per call, then the pixel walks forward.
#pragma once

#include <algorithm>

#include "kernel_table.h"
#include "unrolled.h"

namespace optim::kernels {

// base[i] = offset (in elements) of row m + i's first value, for i in [0, count).
inline void conv_row_bases(const ConvRows& r, int64_t m, int64_t count, int64_t* base) {
  // Rows one after another: unit strides over unpadded rows, and the images back to back or all rows in the first
  // (a tile of rows in cache, image_stride 0). Most 1x1 tiles take this path: the walk below costs three 64-bit
  // divisions, ~100 cycles on AMD Zen, a third of a 6x16 float tile's multiply-adds at K = 16.
  if (r.sw == 1 && r.sh == 1 && r.wp == r.ow && (r.image_stride == r.pixels * r.cs || m + count <= r.pixels)) {
    for (int64_t i = 0; i < count; ++i) base[i] = (m + i) * r.cs;
    return;
  }
  // Walked forward from the first row's pixel: a step along the output row, or to the next row's start (and
  // image), by additions only (a tile's rows cost a few operations each, not multiplications).
  const int64_t oh = r.pixels / r.ow, step = r.sw * r.cs, row_step = r.sh * r.wp * r.cs;
  const int64_t img = m / r.pixels, p = m - img * r.pixels, oy0 = p / r.ow;
  int64_t ox = p - oy0 * r.ow, oy = oy0;
  int64_t row = img * r.image_stride + oy * row_step, at = row + ox * step;
  for (int64_t i = 0; i < count; ++i) {
    base[i] = at;
    at += step;
    if (++ox == r.ow) {
      ox = 0;
      if (++oy == oh) {
        oy = 0;
        row += r.image_stride - (oh - 1) * row_step;
      } else {
        row += row_step;
      }
      at = row;
    }
  }
}

// The taps of a tile's rows m..m+MR-1 (inputs of element type T): body(a) once per tap, in order, a[i] pointing
// at row i's first input value of that tap (a[0..MR)). The walk the register tiles run their K loops in.
// With the rows' bases (conv_row_bases) given: a tile that runs several panels over the same rows finds them once.
template <int MR, typename T, typename Body>
OPTIM_INLINED inline void for_each_tap(const ConvRows& r, const int64_t* base, const Body& body) {
  const T* x = static_cast<const T*>(r.x);
  for (int64_t t = 0; t < r.taps; ++t) {
    const T* a[MR];
    unrolled<MR>([&](auto i) OPTIM_INLINED { a[i] = x + base[i] + r.tap_off[t]; });
    body(a);
  }
}
template <int MR, typename T, typename Body>
OPTIM_INLINED inline void for_each_tap(const ConvRows& r, int64_t m, const Body& body) {
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  for_each_tap<MR, T>(r, base, body);
}

// The order the tiles of rows [m0, m1) x panels [p0, p1) go in: tile(m, rows, p, panels), `rows` <= mr,
// `panels` <= np. When the panels' weights fit in cache (short K: 1x1 and early layers), each block of rows
// runs across every panel, so an input row is read once and an output row written whole before moving on;
// otherwise (long K) each group of panels runs down every row, so each weight panel is read once.
constexpr int64_t kWeightsInCacheBytes = 256 << 10;
inline bool conv_weights_in_cache(int64_t panels, int64_t panel_bytes) { return panels * panel_bytes <= kWeightsInCacheBytes; }

template <typename Tile>
inline void for_each_conv_tile(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t mr, int64_t np, int64_t panel_bytes,
                               const Tile& tile) {
  if (conv_weights_in_cache(p1 - p0, panel_bytes)) {
    for (int64_t m = m0; m < m1; m += mr)
      for (int64_t p = p0; p < p1; p += np) tile(m, std::min(mr, m1 - m), p, std::min(np, p1 - p));
    return;
  }
  for (int64_t p = p0; p < p1; p += np)
    for (int64_t m = m0; m < m1; m += mr) tile(m, std::min(mr, m1 - m), p, std::min(np, p1 - p));
}

// for_each_conv_tile's order for a kernel whose tile takes a range of panels: tile(m, rows, p0, p1) on a block of rows
// across all the panels when the weights are in cache (the tile finds the rows' bases and its epilogue's
// parameters once for them), else on one tile at a time.
template <typename Tile>
inline void for_each_conv_row_block(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t mr, int64_t panel_bytes,
                                    const Tile& tile) {
  const int64_t per_call = conv_weights_in_cache(p1 - p0, panel_bytes) ? std::max<int64_t>(1, p1 - p0) : 1;
  for_each_conv_tile(m0, m1, p0, p1, mr, per_call, panel_bytes,
                     [&](int64_t m, int64_t rows, int64_t p, int64_t panels) { tile(m, rows, p, p + panels); });
}

// The order of the 256-bit integer kernels' tiles (conv_gemm_u8s8_ymm.h), whose 4-row tiles read a panel's
// weights twice as often per multiply-add as the AVX-512 kernels' 8 x 32 ones: blocks of rows whose input
// (row_bytes each) fits in L2, and in each block every panel down all its rows, its weights staying in L1.
template <typename Tile>
inline void for_each_conv_tile_in_row_blocks(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t mr, int64_t row_bytes,
                                             const Tile& tile) {
  constexpr int64_t kRowBlockBytes = 128 << 10;
  const int64_t block = std::max<int64_t>(mr, kRowBlockBytes / std::max<int64_t>(row_bytes, 1) / mr * mr);
  for (int64_t b = m0; b < m1; b += block)
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t m = b; m < std::min(m1, b + block); m += mr) tile(m, std::min(mr, m1 - m), p);
}

// Columns of C in panel p (16 wide) that exist: n - 16p, at most 16.
inline int64_t panel_cols(int64_t n, int64_t p) {
  const int64_t left = n - p * 16;
  return left < 16 ? left : 16;
}

}  // namespace optim::kernels
