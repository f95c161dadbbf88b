// Scalar reference of the direct float convolution (see kernel_table.h, ConvF32Fn).
#include <algorithm>

#include "conv_segment.h"

namespace optim::kernels {

void conv_f32_scalar(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const ConvF32Args& g) {
  const SgemmEpilogue& ep = *g.ep;
  for (int64_t s = s0; s < s1; ++s) {
    const ConvSegment seg = conv_segment(g.segs, s);
    const float* x = g.x + seg.in;
    for (int64_t i = m0; i < m1; ++i) {
      const float* w = g.w + i * g.ldw;
      for (int64_t t = 0; t < seg.cols; ++t) {
        float acc = 0.f;
        for (int64_t k = 0; k < g.k; ++k) acc += w[k] * x[g.tap_off[k] + t];
        float v = ep.alpha * acc;
        if (ep.bias_row) v += ep.bias_row[i];
        if (ep.relu) v = std::max(v, 0.f);
        g.c[i * g.ldc + seg.out + t] = v;
      }
    }
  }
}

}  // namespace optim::kernels
