// The taps of one output pixel of a depthwise convolution that land inside the input (kernel_table.h,
// DwconvGeometry), as input offsets and weight rows: every ISA's kernel sums the same taps in the same order.
#pragma once

#include "kernel_table.h"

namespace optim::kernels {

struct DwconvPixel {
  int64_t img = 0, oy = 0, ox = 0;
  int64_t count = 0;    // valid taps
  int64_t* off;         // input offset (elements, from the image's first value) per valid tap
  int64_t* tap;         // its tap index (ky * kw + kx), the weight row
};

// Fills px.off / px.tap (room for kh * kw each) for output pixel m (images one after another).
inline void dwconv_pixel_taps(const DwconvGeometry& g, int64_t m, DwconvPixel& px) {
  const int64_t pixels = g.oh * g.ow;
  px.img = m / pixels;
  const int64_t p = m % pixels;
  px.oy = p / g.ow;
  px.ox = p % g.ow;
  px.count = 0;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = px.oy * g.sh - g.ph + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = px.ox * g.sw - g.pw + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      px.off[px.count] = (iy * g.w + ix) * g.cs;
      px.tap[px.count] = ky * g.kw + kx;
      ++px.count;
    }
  }
}

// Elements from one image's first input value to the next image's.
inline int64_t dwconv_image_stride(const DwconvGeometry& g) { return g.h * g.w * g.cs; }

}  // namespace optim::kernels
