// Scalar reference NHWC int8 convolution GEMM on int16 pairs (kernel_table.h, ConvGemmQ8Args): A holds the
// input minus its zero point as int16, B the weights minus theirs in pair panels (qgemm_s16_pack_b);
// exact int32 sums, then the shared integer epilogue. Every optimized integer kernel equals it exactly.
#include "conv_rows.h"
#include "qgemm_epilogue.h"

namespace optim::kernels {

void conv_gemm_s16_scalar(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  const ConvRows& r = g.a;
  const int16_t* x = static_cast<const int16_t*>(r.x);
  const int16_t* w = static_cast<const int16_t*>(g.w);
  const int64_t kp = r.taps * r.k_tap / 2;  // pairs; k_tap is even
  for (int64_t m = m0; m < m1; ++m) {
    int64_t base = 0;
    conv_row_bases(r, m, 1, &base);
    for (int64_t p = p0; p < p1; ++p) {
      const int16_t* panel = w + p * kp * 32;
      int32_t acc[16] = {0};
      for (int64_t t = 0; t < r.taps; ++t) {
        const int16_t* a = x + base + r.tap_off[t];
        const int16_t* b = panel + t * (r.k_tap / 2) * 32;
        for (int64_t c = 0; c < r.k_tap; ++c)
          for (int64_t j = 0; j < 16; ++j) acc[j] += int32_t{a[c]} * b[(c / 2 * 16 + j) * 2 + c % 2];
      }
      const int64_t cols = panel_cols(g.n, p);
      for (int64_t j = 0; j < cols; ++j)
        qgemm_store(acc[j] + (g.comp_col ? g.comp_col[p * 16 + j] : 0), m, p * 16 + j, *g.ep, g.c, m * g.ldc + p * 16 + j);
    }
  }
}

}  // namespace optim::kernels
