// A float convolution of one group on the bf16 GEMM (EP option precision=bf16; kernel_table.h sgemm_bf16), for
// NhwcConv: the input is rounded to bf16 once per run, then in chunks of output pixels (a task each, in L2) its
// windows are gathered into bf16 rows (im2col, nothing for a 1x1 stride-1 convolution: the rows are the input's),
// multiplied by the weights (bf16 pair panels, packed once) with the residual (copied into y first: it may be
// y's own buffer) and the bias in the GEMM's epilogue, then the clamp and activation on the chunk's rows while in
// cache. Float32 sums; the error against
// float32 is that of bf16 inputs (tests/ep/test_bf16.py).
#pragma once

#include "conv_nhwc.h"
#include "sgemm_driver.h"

namespace optim {

class ConvBf16 {
 public:
  // Weights as the float GEMM's B (conv_weights_as_b: K = taps x Cin rows, Cout columns), packed for the bf16
  // table kt's GEMM.
  ConvBf16(const std::vector<float>& b, int64_t k, int64_t cout, const kernels::KernelTable& kt);
  const char* kernel_name() const { return weights_.bf16_kernel; }
  // y = act(clamp(conv(x) + bias + residual (null: none; y's shape), ep.lo, ep.hi)) over the layout l.
  void run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y, const float* bias,
           const kernels::ConvF32Epilogue& ep, const float* residual) const;

 private:
  PackedMatrix weights_;
};

// Whether a channels-last convolution runs on ConvBf16 with this table: a bf16 table, one group, not depthwise.
bool conv_runs_bf16(const kernels::KernelTable& kt, const ConvGeometry& cg);

}  // namespace optim
