// The recurrent cells' gate math (kernel_table.h, RnnCell) written once over a vector type: each ISA's
// rnn_cell kernel instantiates it with its own lanes, loads and transcendental functions, so the scalar
// reference and the vector kernels perform the same operations in the same order. A vector type V gives:
//   F (a vector of kWidth floats; kWidth divides kRnnChunk), Lanes(count) with load/store of a plain vector's
//   first `count` (>= 1) units, load (all kWidth units of a chunked gate vector, always allocated), set1,
//   fmadd(a, b, c) = a * b + c, clip(v, lo, hi) = min(max(v, lo), hi) keeping NaN, sigmoid, tanh. F has + - *
//   (float, and __m256 / __m512, vector types to GCC and Clang).
#pragma once

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

template <class V>
struct RnnCellBody {
  using F = typename V::F;
  using Lanes = typename V::Lanes;
  const RnnCellArgs& a;
  F lo, hi, one;

  // Gate g of units [u, u + kWidth) of a chunked gate vector.
  static const float* gate(const float* p, int64_t stride, int g, int64_t u) {
    return p + (u / kRnnChunk) * stride + g * kRnnChunk + u % kRnnChunk;
  }
  F x(int g, int64_t u) const { return V::load(gate(a.x, a.x_stride, g, u)); }
  F hr(int g, int64_t u) const { return V::load(gate(a.hr, a.hr_stride, g, u)); }
  F pre(int g, int64_t u) const { return x(g, u) + hr(g, u); }
  F clip(F v) const { return V::clip(v, lo, hi); }
  // sigmoid(clip(v + p * c)), the peephole term only when there is one.
  F gate_sigmoid(F v, const float* p, F c, int64_t u, const Lanes& l) const {
    return V::sigmoid(clip(p ? V::fmadd(l.load(p + u), c, v) : v));
  }
  // n + z (h_prev - n): GRU's (1 - z) n + z h_prev with one rounding less.
  F gru_out(F z, F n, int64_t u, const Lanes& l) const { return V::fmadd(z, l.load(a.h_prev + u) - n, n); }

  void lstm(int64_t u, const Lanes& l) const {
    const F c = l.load(a.c + u);
    const F i = gate_sigmoid(pre(0, u), a.p_i, c, u, l);
    const F f = a.input_forget ? one - i : gate_sigmoid(pre(2, u), a.p_f, c, u, l);
    const F cn = V::fmadd(f, c, i * V::tanh(clip(pre(3, u))));
    const F o = gate_sigmoid(pre(1, u), a.p_o, cn, u, l);
    l.store(a.c + u, cn);
    l.store(a.h + u, o * V::tanh(cn));
  }
  void gru_linear(int64_t u, const Lanes& l) const {
    const F z = V::sigmoid(clip(pre(0, u))), r = V::sigmoid(clip(pre(1, u)));
    const F n = V::tanh(clip(V::fmadd(r, hr(2, u), x(2, u))));
    l.store(a.h + u, gru_out(z, n, u, l));
  }
  void gru_reset(int64_t u, const Lanes& l) const {
    l.store(a.h + u, V::sigmoid(clip(pre(1, u))) * l.load(a.h_prev + u));
  }
  void gru_update(int64_t u, const Lanes& l) const {
    const F z = V::sigmoid(clip(pre(0, u)));
    const F n = V::tanh(clip(x(2, u) + l.load(a.hh + u)));
    l.store(a.h + u, gru_out(z, n, u, l));
  }
};

template <class V, RnnCell Cell>
void rnn_cells(const RnnCellArgs& a) {
  const RnnCellBody<V> body{a, V::set1(-a.clip), V::set1(a.clip), V::set1(1.f)};
  for (int64_t u = 0; u < a.n; u += V::kWidth) {
    const typename V::Lanes l(a.n - u);
    if constexpr (Cell == RnnCell::kLstm) body.lstm(u, l);
    if constexpr (Cell == RnnCell::kGruLinear) body.gru_linear(u, l);
    if constexpr (Cell == RnnCell::kGruReset) body.gru_reset(u, l);
    if constexpr (Cell == RnnCell::kGruUpdate) body.gru_update(u, l);
  }
}

// The kernel: one loop per cell, so the choice stays out of the loop.
template <class V>
void rnn_cell_kernel(RnnCell cell, const RnnCellArgs& a) {
  switch (cell) {
    case RnnCell::kLstm: return rnn_cells<V, RnnCell::kLstm>(a);
    case RnnCell::kGruLinear: return rnn_cells<V, RnnCell::kGruLinear>(a);
    case RnnCell::kGruReset: return rnn_cells<V, RnnCell::kGruReset>(a);
    case RnnCell::kGruUpdate: return rnn_cells<V, RnnCell::kGruUpdate>(a);
  }
}

}  // namespace
}  // namespace optim::kernels
