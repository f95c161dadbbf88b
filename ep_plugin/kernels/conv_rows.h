// Where the rows of an NHWC convolution GEMM start (kernel_table.h, ConvRows): shared by every ISA's
// kernel so that they read the same pixels. One division per call, then the pixel walks forward.
#pragma once

#include "kernel_table.h"

namespace optim::kernels {

// base[i] = offset (in elements) of row m + i's first value, for i in [0, count).
inline void conv_row_bases(const ConvRows& r, int64_t m, int64_t count, int64_t* base) {
  if (r.sw == 1 && r.sh == 1 && r.wp == r.ow && r.image_stride == r.pixels * r.cs) {  // rows one after another
    for (int64_t i = 0; i < count; ++i) base[i] = (m + i) * r.cs;
    return;
  }
  const int64_t oh = r.pixels / r.ow;
  int64_t img = m / r.pixels, p = m % r.pixels;
  int64_t oy = p / r.ow, ox = p % r.ow;
  for (int64_t i = 0; i < count; ++i) {
    base[i] = img * r.image_stride + (oy * r.sh * r.wp + ox * r.sw) * r.cs;
    if (++ox == r.ow) {
      ox = 0;
      if (++oy == oh) {
        oy = 0;
        ++img;
      }
    }
  }
}

// Columns of C in panel p (16 wide) that exist: n - 16p, at most 16.
inline int64_t panel_cols(int64_t n, int64_t p) {
  const int64_t left = n - p * 16;
  return left < 16 ? left : 16;
}

}  // namespace optim::kernels
