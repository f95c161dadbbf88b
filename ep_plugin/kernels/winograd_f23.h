// Winograd F(2x2, 3x3) tile transforms (kernel_table.h: WinogradInputF32Fn / WinogradOutputF32Fn, and the exact
// integer WinogradInputQ8Fn / WinogradOutputQ8Fn) written once over a vector type, as softmax_row.h does: each
// vector holds the same tile value of kWidth adjacent channels (NHWC), so a transform is a few adds and subtracts
// per vector. The scalar kernels are the same body on one element, and the vector kernels send their last
// channels through it: every ISA adds in the same order and gives the same bits.
// An input type I gives: In (the pixels' element), Out (V's), Reg, kWidth, load (an object's: it may carry the
// zero point), store, add, sub. An output type O gives: Sum (M's element), Reg, kWidth, load, add, sub and
// emit(y, pixel row, channel) (the epilogue and the store; an object's, holding C and the epilogue).
#pragma once

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// V = Bt d B for one channel block of one tile: d's 16 pixels at px[i * 4 + j] + c, V's 16 positions
// pos = i * 4 + j at v + pos * ld_pos. Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <class I>
inline void winograd_input_block(const I& in, const typename I::In* const* px, int64_t c, typename I::Out* v,
                                 int64_t ld_pos) {
  typename I::Reg t[16];
  for (int j = 0; j < 4; ++j) {  // rows: t = Bt d, column j
    const typename I::Reg d0 = in.load(px[j] + c), d1 = in.load(px[4 + j] + c);
    const typename I::Reg d2 = in.load(px[8 + j] + c), d3 = in.load(px[12 + j] + c);
    t[j] = I::sub(d0, d2);
    t[4 + j] = I::add(d1, d2);
    t[8 + j] = I::sub(d2, d1);
    t[12 + j] = I::sub(d1, d3);
  }
  for (int i = 0; i < 4; ++i) {  // columns: V = t B, row i
    const typename I::Reg* r = t + i * 4;
    I::store(v + (i * 4 + 0) * ld_pos, I::sub(r[0], r[2]));
    I::store(v + (i * 4 + 1) * ld_pos, I::add(r[1], r[2]));
    I::store(v + (i * 4 + 2) * ld_pos, I::sub(r[2], r[1]));
    I::store(v + (i * 4 + 3) * ld_pos, I::sub(r[1], r[3]));
  }
}

// Y = At M A for one channel block of one tile (M's positions at m + pos * ld_pos), At = [1 1 1 0; 0 1 -1 -1]:
// y[i * 2 + k] is output pixel (i, k) of the tile.
template <class O>
inline void winograd_output_values(const typename O::Sum* m, int64_t ld_pos, typename O::Reg* y) {
  typename O::Reg s[8];
  for (int q = 0; q < 4; ++q) {  // rows: s = At M, column q
    const typename O::Reg m0 = O::load(m + q * ld_pos), m1 = O::load(m + (4 + q) * ld_pos);
    const typename O::Reg m2 = O::load(m + (8 + q) * ld_pos), m3 = O::load(m + (12 + q) * ld_pos);
    s[q] = O::add(O::add(m0, m1), m2);
    s[4 + q] = O::sub(O::sub(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {  // columns: Y = s A, row i
    const typename O::Reg* r = s + i * 4;
    y[i * 2] = O::add(O::add(r[0], r[1]), r[2]);
    y[i * 2 + 1] = O::sub(O::sub(r[1], r[2]), r[3]);
  }
}

// ... then the epilogue into each of the 2x2 output pixels inside the image (row >= 0).
template <class O>
inline void winograd_output_block(const O& out, const typename O::Sum* m, int64_t ld_pos, const int64_t* row, int64_t j) {
  typename O::Reg y[4];
  winograd_output_values<O>(m, ld_pos, y);
  for (int k = 0; k < 4; ++k)
    if (row[k] >= 0) out.emit(y[k], row[k], j);
}

// One float: the scalar kernels' type and the vector kernels' last channels.
struct WinogradScalar {
  using In = float;
  using Out = float;
  using Sum = float;
  using Reg = float;
  static constexpr int64_t kWidth = 1;
  static Reg load(const float* p) { return *p; }
  static void store(float* p, Reg v) { *p = v; }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg sub(Reg a, Reg b) { return a - b; }
  static Reg finish(Reg v, const float* bias, const float* residual, const ConvF32Epilogue& ep) {
    if (bias) v += *bias;
    if (residual) v += *residual;
    v = std::max(v, ep.lo);  // NaN stays NaN: std::max returns its first argument when unordered
    v = std::min(v, ep.hi);
    if (ep.has_act) activation_f32_scalar(ep.act, ep.act_params, &v, &v, 1);
    return v;
  }
};

// The float output: the convolution epilogue (V::finish) into C's row `px`.
template <class V>
struct WinogradF32Out : V {
  float* c;
  int64_t ldc;
  const ConvF32Epilogue& ep;
  WinogradF32Out(float* c_, int64_t ldc_, const ConvF32Epilogue& ep_) : c(c_), ldc(ldc_), ep(ep_) {}
  void emit(typename V::Reg y, int64_t px, int64_t j) const {
    const float* bias = ep.bias ? ep.bias + j : nullptr;
    const float* res = ep.residual ? ep.residual + px * ep.ld_residual + j : nullptr;
    V::store(c + px * ldc + j, V::finish(y, bias, res, ep));
  }
};

// The input transform of `tiles` tiles, V's rows `padded` values long (channels past `channels` zero).
template <class I, class IScalar>
void winograd_input_tiles(const I& in, const IScalar& in_scalar, const typename I::In* const* px, int64_t tiles,
                          int64_t channels, int64_t padded, typename I::Out* v, int64_t ld_pos, int64_t ld_tile) {
  for (int64_t t = 0; t < tiles; ++t, px += 16, v += ld_tile) {
    int64_t c = 0;
    for (; c + I::kWidth <= channels; c += I::kWidth) winograd_input_block(in, px, c, v + c, ld_pos);
    for (; c < channels; ++c) winograd_input_block(in_scalar, px, c, v + c, ld_pos);
    for (; c < padded; ++c)
      for (int pos = 0; pos < 16; ++pos) v[pos * ld_pos + c] = typename I::Out{};
  }
}

template <class O, class OScalar>
void winograd_output_tiles(const O& out, const OScalar& out_scalar, const typename O::Sum* m, int64_t ld_pos,
                           int64_t ld_tile, int64_t tiles, int64_t cols, const int64_t* pixel, int64_t j0) {
  for (int64_t t = 0; t < tiles; ++t, m += ld_tile, pixel += 4) {
    int64_t j = 0;
    for (; j + O::kWidth <= cols; j += O::kWidth) winograd_output_block(out, m + j, ld_pos, pixel, j0 + j);
    for (; j < cols; ++j) winograd_output_block(out_scalar, m + j, ld_pos, pixel, j0 + j);
  }
}

template <class V>
void winograd_input(const float* const* px, int64_t tiles, int64_t channels, float* v, int64_t ld_pos, int64_t ld_tile) {
  winograd_input_tiles(V{}, WinogradScalar{}, px, tiles, channels, channels, v, ld_pos, ld_tile);
}

template <class V>
void winograd_output(const float* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols, const int64_t* pixel,
                     float* c, int64_t ldc, int64_t j0, const ConvF32Epilogue& ep) {
  winograd_output_tiles(WinogradF32Out<V>(c, ldc, ep), WinogradF32Out<WinogradScalar>(c, ldc, ep), m, ld_pos, ld_tile,
                        tiles, cols, pixel, j0);
}

}  // namespace
}  // namespace optim::kernels
