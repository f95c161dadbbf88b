// Scalar reference of the direct int8 convolution (see kernel_table.h): the definition the AVX2 kernel
// must equal exactly. The exact int32 dot product of each weight row with each pixel's taps, then the
// shared epilogue.
#include <algorithm>

#include "conv_segment.h"
#include "qgemm_epilogue.h"

namespace optim::kernels {

void qconv_s16_scalar(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const QconvArgs& g) {
  for (int64_t s = s0; s < s1; ++s) {
    const ConvSegment seg = conv_segment(g.segs, s);
    const int64_t cols = seg.cols, j0 = seg.out;
    const int16_t* x = static_cast<const int16_t*>(g.x) + seg.in;
    for (int64_t i = m0; i < m1; ++i) {
      const int16_t* arow = static_cast<const int16_t*>(g.a) + i * g.lda;
      for (int64_t t = 0; t < cols; ++t) {
        int32_t acc = 0;
        for (int64_t k = 0; k < 2 * g.kg; ++k) acc += static_cast<int32_t>(arow[k]) * x[g.tap_off[k] + t];
        qgemm_store(acc, i, j0 + t, *g.ep, g.c, i * g.ldc + j0 + t);
      }
    }
  }
}

}  // namespace optim::kernels
