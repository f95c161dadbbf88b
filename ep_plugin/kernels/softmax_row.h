// The vector Softmax of one contiguous row (kernel_table.h, SoftmaxFn) written once over a vector type, as
// rnn_cell_body.h does for the recurrent cells: three passes of kWidth floats, the maximum, exp(x - max)
// stored and summed, then the scale by 1 / sum. The tail is loaded padded with -inf (its exp is 0, so the
// sum is unchanged). Attention rows are short (128 to 197 values, thousands of rows): one call per row.
// A vector type V gives: Reg, kWidth, load/store (kWidth floats), load_part(p, count, fill) (the first
// count floats, fill past them), store_part(p, count, v), set1, max, add, sub, mul, exp, reduce_max, reduce_add.
#pragma once

#include <cmath>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

template <class V>
void softmax_row(const float* x, float* y, int64_t n) {
  const int64_t full = n / V::kWidth * V::kWidth, rest = n - full;
  const typename V::Reg tail = V::load_part(x + full, rest, -INFINITY);
  typename V::Reg mx = tail;
  for (int64_t i = 0; i < full; i += V::kWidth) mx = V::max(mx, V::load(x + i));
  const typename V::Reg m = V::set1(V::reduce_max(mx));
  typename V::Reg sum = V::set1(0.f);
  for (int64_t i = 0; i < full; i += V::kWidth) {
    const typename V::Reg e = V::exp(V::sub(V::load(x + i), m));
    V::store(y + i, e);
    sum = V::add(sum, e);
  }
  const typename V::Reg e_tail = V::exp(V::sub(tail, m));
  sum = V::add(sum, e_tail);
  const typename V::Reg inv = V::set1(1.f / V::reduce_add(sum));
  for (int64_t i = 0; i < full; i += V::kWidth) V::store(y + i, V::mul(V::load(y + i), inv));
  if (rest) V::store_part(y + full, rest, V::mul(e_tail, inv));
}

}  // namespace
}  // namespace optim::kernels
