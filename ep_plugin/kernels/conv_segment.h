// Where segment s of a direct convolution (kernel_table.h, QconvArgs) reads and writes: shared by
// every ISA's kernel so that they walk the same pixels.
#pragma once

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

struct ConvSegment {
  int64_t cols;  // output pixels in it, up to kConvSeg
  int64_t in;    // its offset in the prepared input
  int64_t out;   // its first column of C
};

inline ConvSegment conv_segment(const ConvSegments& g, int64_t s) {
  const int64_t row = s / g.per_row, col = (s % g.per_row) * kConvSeg;
  return {std::min(kConvSeg, g.out_w - col), row * g.row_step + col, row * g.out_w + col};
}

// Calls tile(segment, first row, rows) for segments [s0, s1) and rows [m0, m1) in blocks of MR.
template <int64_t MR, typename Tile>
inline void for_each_conv_tile(const ConvSegments& g, int64_t m0, int64_t m1, int64_t s0, int64_t s1, Tile tile) {
  for (int64_t s = s0; s < s1; ++s) {
    const ConvSegment seg = conv_segment(g, s);
    for (int64_t i = m0; i < m1; i += MR) tile(seg, i, std::min(MR, m1 - i));
  }
}

}  // namespace optim::kernels
