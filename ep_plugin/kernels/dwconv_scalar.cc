// Scalar reference depthwise NHWC convolutions (kernel_table.h): float32, and int8 summed exactly in
// float32 then requantized by the shared integer epilogue. Taps in the padding are skipped.
#include <vector>

#include "conv_f32_epilogue.h"
#include "dwconv_taps.h"
#include "qgemm_epilogue.h"

namespace optim::kernels {

void dwconv_f32_scalar(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  std::vector<int64_t> off(static_cast<size_t>(g.kh * g.kw)), tap(off.size());
  std::vector<float> acc(static_cast<size_t>(g.channels));
  DwconvPixel px{0, 0, 0, 0, off.data(), tap.data()};
  for (int64_t m = m0; m < m1; ++m) {
    dwconv_pixel_taps(g, m, px);
    const float* x = a.x + px.img * dwconv_image_stride(g);
    for (int64_t j = 0; j < g.channels; ++j) {
      float s = 0.f;
      for (int64_t t = 0; t < px.count; ++t) s += x[px.off[t] + j] * a.w[px.tap[t] * g.channels + j];
      acc[static_cast<size_t>(j)] = s;
    }
    ConvF32Epilogue ep = a.ep;  // pixel m's C row (from c_row0) and residual row, passed as row 0
    if (ep.residual) ep.residual += m * ep.ld_residual;
    conv_f32_store_scalar(acc.data(), g.channels, 0, 0, a.c + (m - a.c_row0) * a.ldc, a.ldc, ep);
  }
}

void dwconv_q8_scalar(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  std::vector<int64_t> off(static_cast<size_t>(g.kh * g.kw)), tap(off.size());
  DwconvPixel px{0, 0, 0, 0, off.data(), tap.data()};
  for (int64_t m = m0; m < m1; ++m) {
    dwconv_pixel_taps(g, m, px);
    const int64_t image = px.img * dwconv_image_stride(g);
    auto x_at = [&](int64_t i) -> float {
      if (!a.xq) return a.x[i];
      return static_cast<float>((a.x_signed ? static_cast<int8_t>(a.xq[i]) : int32_t{a.xq[i]}) - a.x_zero);
    };
    for (int64_t j = 0; j < g.channels; ++j) {
      float s = 0.f;  // exact: every partial sum is an integer below 2^24 (the op checks the bound)
      for (int64_t t = 0; t < px.count; ++t) s += x_at(image + px.off[t] + j) * a.w[px.tap[t] * g.channels + j];
      if (a.centered16)
        static_cast<int16_t*>(a.c)[m * a.ldc + j] =
            static_cast<int16_t>(qgemm_quantized(qgemm_real(static_cast<int32_t>(s), m, j, *a.ep), *a.ep) - a.ep->out_zero);
      else
        qgemm_store(static_cast<int32_t>(s), m, j, *a.ep, a.c, m * a.ldc + j);
    }
  }
}

}  // namespace optim::kernels
