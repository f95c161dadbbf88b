// Walking a numpy-broadcast output together with its inputs, for ops whose elements are not float32
// runs (masks, indices): one output element at a time, each input's offset kept by an odometer.
#pragma once

#include <array>
#include <cstring>

#include "op.h"

namespace optim {

// Calls fn(o, offsets) for every output element o in order, offsets[i] the element of input i that
// broadcasts to it (inputs right-aligned to the output's rank, size-1 dims repeated).
template <size_t N, typename Fn>
void for_each_broadcast(const Shape& out, const std::array<const Shape*, N>& ins, Fn fn) {
  const size_t r = out.size();
  const int64_t total = shape_numel(out);
  if (total <= 0) return;
  // Per input and output dim, the input stride (0 where the input is broadcast).
  std::vector<std::array<int64_t, N>> stride(r);
  for (size_t i = 0; i < N; ++i) {
    const Shape& s = *ins[i];
    int64_t st = 1;
    for (size_t d = r; d-- > 0;) {
      const size_t k = d + s.size();  // index into s once right-aligned, valid when >= r
      const int64_t dim = k >= r ? s[k - r] : 1;
      stride[d][i] = dim == 1 ? 0 : st;
      st *= dim;
    }
  }
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  for (int64_t o = 0; o < total; ++o) {
    fn(o, off);
    for (size_t d = r; d-- > 0;) {  // odometer step: the last dim first
      ++idx[d];
      for (size_t i = 0; i < N; ++i) off[i] += stride[d][i];
      if (idx[d] < out[d]) break;
      for (size_t i = 0; i < N; ++i) off[i] -= stride[d][i] * out[d];
      idx[d] = 0;
    }
  }
}

// Copies element `from` of src to element `to` of dst, for elements of `size` bytes.
inline void copy_element(const void* src, int64_t from, void* dst, int64_t to, size_t size) {
  std::memcpy(static_cast<uint8_t*>(dst) + static_cast<size_t>(to) * size,
              static_cast<const uint8_t*>(src) + static_cast<size_t>(from) * size, size);
}

}  // namespace optim
