// Scalar reference NHWC convolution GEMM on float32 (kernel_table.h, ConvGemmF32Args): the definition the
// vector kernels follow, one output at a time, sums in tap and channel order.
#include "conv_f32_epilogue.h"
#include "conv_rows.h"

namespace optim::kernels {

void conv_gemm_f32_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmF32Args& g) {
  const ConvRows& r = g.a;
  const float* x = static_cast<const float*>(r.x);
  const int64_t k = r.taps * r.k_tap;
  for (int64_t m = m0; m < m1; ++m) {
    int64_t base = 0;
    conv_row_bases(r, m, 1, &base);
    for (int64_t p = p0; p < p1; ++p) {
      const float* panel = g.w + p * k * 16;
      float acc[16] = {0};
      for (int64_t t = 0; t < r.taps; ++t) {
        const float* a = x + base + r.tap_off[t];
        const float* b = panel + t * r.k_tap * 16;
        for (int64_t c = 0; c < r.k_tap; ++c)
          for (int64_t j = 0; j < 16; ++j) acc[j] += a[c] * b[c * 16 + j];
      }
      conv_f32_store_scalar(acc, panel_cols(g.n, p), m, p * 16, g.c, g.ldc, g.ep);
    }
  }
}

}  // namespace optim::kernels
