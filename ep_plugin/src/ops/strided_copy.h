// Copying a box of elements between two strided layouts, for the data-movement ops that select, split,
// repeat or place blocks of a tensor (Slice, Split, Tile, Pad): type-blind, any fixed element size.
#pragma once

#include <vector>

#include "op.h"

namespace optim {

// Element (i_0, ..., i_r-1) of a box of `size` goes from src + sum i_d * src_stride[d] to
// dst + sum i_d * dst_stride[d]; strides in elements, a source stride may be 0 (repeat) or negative.
struct StridedBox {
  std::vector<int64_t> size, src_stride, dst_stride;
  void add_dim(int64_t n, int64_t src, int64_t dst) {
    size.push_back(n);
    src_stride.push_back(src);
    dst_stride.push_back(dst);
  }
};

// Copies the box (rows of contiguous runs with memcpy), threads over rows when it is large.
void copy_box(const RunContext& rc, const void* src, void* dst, size_t elem_size, StridedBox box);

// Row-major strides (in elements) of a shape.
std::vector<int64_t> row_major_strides(const Shape& s);

}  // namespace optim
