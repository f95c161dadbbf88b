// Winograd F(2x2, 3x3) tile transforms (kernel_table.h, WinogradInputF32Fn / WinogradOutputF32Fn) written
// once over a vector type, as softmax_row.h does: each vector holds the same tile value of kWidth adjacent
// channels (NHWC), so a transform is a few adds and subtracts per vector. The scalar kernels are the same
// body on one float, and the vector kernels send their last channels through it: every ISA adds in the same
// order and gives the same bits. A vector type V gives: Reg, kWidth, load, store, add, sub and
// finish(v, bias, residual, ep) (the convolution epilogue: bias, residual, clamp, activation; pointers null
// when absent).
#pragma once

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// V = Bt d B for one channel block of one tile: d's 16 pixels at px[i * 4 + j] + c, V's 16 positions
// pos = i * 4 + j at v + pos * ld_pos. Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <class V>
inline void winograd_input_block(const float* const* px, int64_t c, float* v, int64_t ld_pos) {
  typename V::Reg t[16];
  for (int j = 0; j < 4; ++j) {  // rows: t = Bt d, column j
    const typename V::Reg d0 = V::load(px[j] + c), d1 = V::load(px[4 + j] + c);
    const typename V::Reg d2 = V::load(px[8 + j] + c), d3 = V::load(px[12 + j] + c);
    t[j] = V::sub(d0, d2);
    t[4 + j] = V::add(d1, d2);
    t[8 + j] = V::sub(d2, d1);
    t[12 + j] = V::sub(d1, d3);
  }
  for (int i = 0; i < 4; ++i) {  // columns: V = t B, row i
    const typename V::Reg* r = t + i * 4;
    V::store(v + (i * 4 + 0) * ld_pos, V::sub(r[0], r[2]));
    V::store(v + (i * 4 + 1) * ld_pos, V::add(r[1], r[2]));
    V::store(v + (i * 4 + 2) * ld_pos, V::sub(r[2], r[1]));
    V::store(v + (i * 4 + 3) * ld_pos, V::sub(r[1], r[3]));
  }
}

// Y = At M A for one channel block of one tile (M's positions at m + pos * ld_pos), At = [1 1 1 0; 0 1 -1 -1];
// then the epilogue into each of the 2x2 output pixels inside the image (row >= 0).
template <class V>
inline void winograd_output_block(const float* m, int64_t ld_pos, const int64_t* row, float* c, int64_t ldc, int64_t j,
                                  const ConvF32Epilogue& ep) {
  typename V::Reg s[8];
  for (int q = 0; q < 4; ++q) {  // rows: s = At M, column q
    const typename V::Reg m0 = V::load(m + q * ld_pos), m1 = V::load(m + (4 + q) * ld_pos);
    const typename V::Reg m2 = V::load(m + (8 + q) * ld_pos), m3 = V::load(m + (12 + q) * ld_pos);
    s[q] = V::add(V::add(m0, m1), m2);
    s[4 + q] = V::sub(V::sub(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {  // columns: Y = s A, row i
    const typename V::Reg* r = s + i * 4;
    const typename V::Reg y[2] = {V::add(V::add(r[0], r[1]), r[2]), V::sub(V::sub(r[1], r[2]), r[3])};
    for (int k = 0; k < 2; ++k) {
      const int64_t px = row[i * 2 + k];
      if (px < 0) continue;
      const float* bias = ep.bias ? ep.bias + j : nullptr;
      const float* res = ep.residual ? ep.residual + px * ep.ld_residual + j : nullptr;
      V::store(c + px * ldc + j, V::finish(y[k], bias, res, ep));
    }
  }
}

// One float: the scalar kernels' type and the vector kernels' last channels.
struct WinogradScalar {
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

template <class V>
void winograd_input(const float* const* px, int64_t tiles, int64_t channels, float* v, int64_t ld_pos, int64_t ld_tile) {
  for (int64_t t = 0; t < tiles; ++t, px += 16, v += ld_tile) {
    int64_t c = 0;
    for (; c + V::kWidth <= channels; c += V::kWidth) winograd_input_block<V>(px, c, v + c, ld_pos);
    for (; c < channels; ++c) winograd_input_block<WinogradScalar>(px, c, v + c, ld_pos);
  }
}

template <class V>
void winograd_output(const float* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols, const int64_t* pixel,
                     float* c, int64_t ldc, int64_t j0, const ConvF32Epilogue& ep) {
  for (int64_t t = 0; t < tiles; ++t, m += ld_tile, pixel += 4) {
    int64_t j = 0;
    for (; j + V::kWidth <= cols; j += V::kWidth) winograd_output_block<V>(m + j, ld_pos, pixel, c, ldc, j0 + j, ep);
    for (; j < cols; ++j) winograd_output_block<WinogradScalar>(m + j, ld_pos, pixel, c, ldc, j0 + j, ep);
  }
}

}  // namespace
}  // namespace optim::kernels
