// ConvBf16 (conv_bf16.h).
#include "conv_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace optim {

ConvBf16::ConvBf16(const std::vector<float>& b, int64_t k, int64_t cout, const kernels::KernelTable& kt) {
  weights_ = pack_matrix(b.data(), k, cout, false);
  weights_.use_bf16(kt);
}

bool conv_runs_bf16(const kernels::KernelTable& kt, const ConvGeometry& cg) {
  return kt.sgemm_bf16 && kt.convert_bf16 && cg.group == 1 && !(cg.cin_g == 1 && cg.cout == cg.group);
}

void ConvBf16::run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y, const float* bias,
                   const kernels::ConvF32Epilogue& ep, const float* residual) const {
  if (weights_.bf16.empty()) throw Error("the convolution's weights were not packed for the bf16 GEMM");
  const int64_t c = l.c, cin_row = kernels::sgemm_bf16_row(c), taps = l.kh * l.kw, k = taps * c;
  const int64_t k_row = kernels::sgemm_bf16_row(k), cout = weights_.n, m = l.n * l.pixels();
  // The input in bf16, once: a row of cin_row values per input pixel (zero past C).
  thread_local std::vector<uint16_t> xb;
  const int64_t in_pixels = l.n * l.h * l.w;
  xb.resize(static_cast<size_t>(in_pixels * cin_row));
  uint16_t* xs = xb.data();
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(c, 1));
  rc.parallel_for(static_cast<size_t>((in_pixels + per_task - 1) / per_task), [&](size_t t) {
    const int64_t p0 = static_cast<int64_t>(t) * per_task;
    rc.kernels.convert_bf16(x, c, c, p0, std::min(in_pixels, p0 + per_task), xs);
  });
  const bool in_place = taps == 1 && l.sh == 1 && l.sw == 1 && !l.reads_padding && k_row == cin_row;
  // Chunks of output rows (a multiple of 32: whole AMX tiles), 16 of them where the image allows, 512 rows at
  // most: each task's windows stay in L2 while the GEMM reads them.
  const int64_t chunk = std::clamp<int64_t>((m + 15) / 16 + 31, 32, 512) / 32 * 32;
  const int64_t chunks = (m + chunk - 1) / chunk, panels = (cout + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
  // The residual may be y's own buffer (Op::in_place_input): it goes into y first and the GEMM adds to it.
  kernels::SgemmEpilogue sep;
  sep.bias_col = bias;
  sep.accumulate = residual != nullptr;
  const bool after = ep.has_act || ep.lo > -__builtin_inff() || ep.hi < __builtin_inff();
  rc.parallel_for(static_cast<size_t>(chunks), [&](size_t t) {
    const int64_t m0 = static_cast<int64_t>(t) * chunk, m1 = std::min(m, m0 + chunk);
    const uint16_t* a = xs + m0 * cin_row;
    thread_local std::vector<uint16_t> rows;  // the chunk's windows, 32 rows of zero padding past the last
    if (!in_place || m1 - m0 < chunk) {
      rows.assign(static_cast<size_t>((chunk + 32) * k_row), 0);
      for (int64_t r = m0; r < m1; ++r) {
        uint16_t* row = rows.data() + (r - m0) * k_row;
        const int64_t img = r / l.pixels(), oy = r % l.pixels() / l.ow, ox = r % l.ow;
        for (int64_t ky = 0; ky < l.kh; ++ky) {
          const int64_t iy = oy * l.sh - l.ph + ky * l.dh;
          if (iy < 0 || iy >= l.h) continue;
          for (int64_t kx = 0; kx < l.kw; ++kx) {
            const int64_t ix = ox * l.sw - l.pw + kx * l.dw;
            if (ix < 0 || ix >= l.w) continue;
            std::memcpy(row + (ky * l.kw + kx) * c, xs + ((img * l.h + iy) * l.w + ix) * cin_row,
                        static_cast<size_t>(c) * sizeof(uint16_t));
          }
        }
      }
      a = rows.data();
    }
    float* yc = y + m0 * cout;
    const int64_t n = (m1 - m0) * cout;
    if (residual && residual != y) std::memcpy(yc, residual + m0 * cout, static_cast<size_t>(n) * sizeof(float));
    rc.kernels.sgemm_bf16(0, m1 - m0, 0, panels, cout, k, a, k_row, weights_.bf16.data(), yc, cout, sep);
    if (!after) return;
    for (int64_t i = 0; i < n; ++i) yc[i] = std::min(std::max(yc[i], ep.lo), ep.hi);
    if (ep.has_act) rc.kernels.activation(ep.act, ep.act_params, yc, yc, n);
  });
}

}  // namespace optim
