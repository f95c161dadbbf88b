// The ways a float channels-last convolution (conv_nhwc_op.cc) computes y = act(clamp(conv(x) + bias + residual)),
// one class per algorithm, chosen once from the node's folded stages and attributes (choose_nhwc_conv_algorithm):
// - ExpandedDepthwise: a depthwise convolution with its 1x1 expansion folded in (stage kFloatExpansion), maybe
//   pooling its output for a squeeze-excite (conv_dw_pw.h);
// - Winograd: algorithm="winograd", a 3x3 stride-1 convolution of one group (conv_winograd.h);
// - DepthwiseThenPointwise: a 1x1 convolution with the depthwise before it folded in (stage kFloatDepthwise);
// - ChannelScaled: a 1x1 convolution with a squeeze-excite gate on its input channels (stage kChannelScale);
// - Depthwise: one channel per group, the dwconv_f32 kernels;
// - NchwStem: a stem reading the partition's channels-first input (attribute nchw_input);
// - DenseGemm: the rest, the conv_gemm_f32 kernels over output pixels (or, with precision=bf16, conv_bf16.h).
// The op around it (conv_nhwc_op.cc) owns the epilogue and a residual that broadcasts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conv_nhwc.h"
#include "../aligned_vector.h"

namespace optim {

// What every algorithm of one convolution reads: its geometry, its weights until prepared, its bias, and the GEMM
// panels once pack_gemm() made them.
struct NhwcConvWeights {
  ConvGeometry cg;
  std::vector<float> weights;                // [Cout, Cin/g, taps] until prepare()
  std::vector<float> bias;                   // empty, or Cout values
  std::vector<AlignedVector<float>> packed;  // per group: GEMM B panels (dense), once pack_gemm() ran

  void pack_gemm();
  void drop_weights();
  const float* bias_from(int64_t channel) const { return bias.empty() ? nullptr : bias.data() + channel; }
  // A one-group GEMM of rows `a` with packed weights w into C rows at c (row stride Cout), bias and the residual's
  // matching rows (or null) in the epilogue.
  kernels::ConvGemmF32Args gemm_args(const kernels::ConvRows& a, const float* w, float* c, const kernels::ConvF32Epilogue& ep,
                                     const float* residual) const;
};

// One run: input x (shape xs), output y; ep holds the clamp, the activation and the residual (same shape as y, or
// null), its bias the algorithm's to set; scratch as scratch_bytes asked; scale the folded gate (ChannelScaled);
// pooled the squeeze-excite pool's output (ExpandedDepthwise, or null).
struct NhwcConvCall {
  const Shape& xs;
  const float* x;
  float* y;
  const kernels::ConvF32Epilogue& ep;
  float* scratch;
  const TensorRef* scale = nullptr;
  float* pooled = nullptr;
};

class NhwcConvAlgorithm {
 public:
  virtual ~NhwcConvAlgorithm() = default;
  const ConvGeometry& geometry() const { return w_.cg; }
  // Packs the weights for the kernels of table kt.
  virtual void prepare(const kernels::KernelTable& kt) = 0;
  // What the convolution's own geometry applies to for input x (the folded depthwise's output, the folded
  // expansion's, a channels-first input seen channels-last, or x itself).
  virtual Shape conv_input_shape(const Shape& x) const { return x; }
  virtual size_t scratch_bytes(const Shape& x) const = 0;
  virtual void run(const RunContext& rc, const NhwcConvCall& c) const = 0;
  virtual std::string kernel_name() const { return ""; }

 protected:
  explicit NhwcConvAlgorithm(NhwcConvWeights w) : w_(std::move(w)) {}
  NhwcConvWeights w_;
};

// The algorithm of NhwcConv node n (weights read into w); throws Error naming n where its stages and attributes
// do not go together.
std::unique_ptr<NhwcConvAlgorithm> choose_nhwc_conv_algorithm(const Node& n, const Graph& g, NhwcConvWeights w,
                                                              bool pooled);

}  // namespace optim
