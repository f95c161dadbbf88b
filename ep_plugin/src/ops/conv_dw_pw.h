// A depthwise convolution and the 1x1 convolution that reads it, in one pass (rewrites/depthwise_pointwise.cc
// folds the pair into the pointwise NhwcConv, the depthwise's attributes prefixed "dw_"), and optionally the
// 1x1 expansion before it too ("ex_" attributes, stage kFloatExpansion of unit_stages.h): a MobileNet block's
// expanded tensor (8x112x112x96 floats at batch 8: 38 MB) then never goes to memory. Without the expansion, tasks take a
// block of output pixels, run the depthwise kernel on it into a tile of their scratch slot, and hand the tile
// to the pointwise GEMM while it is in cache; with it, runs of bands of output rows of one image: a band's
// input rows come from the expansion GEMM, except those it shares with the band before, which are kept
// (depthwise_bands.h; only the first band of a run remakes them; runs are few, enough for every thread).
#pragma once

#include <functional>

#include "../aligned_vector.h"
#include "conv_nhwc.h"
#include "depthwise_bands.h"

namespace optim {

// The depthwise attributes and epilogue of node n under `prefix` ("activation_min", "activation" and so on):
// lo, hi and the activation of a ConvF32Epilogue (bias and residual are the op's).
kernels::ConvF32Epilogue read_conv_epilogue(const Node& n, const std::string& prefix);

// Input `input` of n, when present, as `count` float32 constants (a convolution's bias), else empty.
std::vector<float> read_conv_bias(const Node& n, const Graph& g, size_t input, int64_t count);

class DepthwiseStage {
 public:
  // n: the pointwise node with the depthwise's weights and bias (stage kFloatDepthwise, unit_stages.h) and its
  // "dw_" attributes, or (hosted_by_pointwise false) the depthwise node itself; either maybe with the
  // expansion's (stage kFloatExpansion; "ex_" attributes).
  DepthwiseStage(const Node& n, const Graph& g, bool hosted_by_pointwise);
  bool has_expansion() const { return ex_ != nullptr; }
  void prepare();
  int64_t channels() const { return cg_.cout; }
  // The depthwise's output (the pointwise's input) for NHWC input x (the expansion's, when folded in).
  Shape output_shape(const Shape& x) const { return nhwc_conv_output_shape(cg_, depthwise_input_shape(x)); }
  size_t scratch_bytes(const Shape& x) const;
  // For blocks of output pixels [m0, m1) (images one after another): tile = depthwise(x) of those pixels
  // (m1 - m0 rows of channels() floats), then pointwise(tile, m0, m1), on the pool. With `out` (the whole
  // depthwise output, row stride channels()), the tiles are its rows, written there rather than in scratch.
  void run(const RunContext& rc, const Shape& xs, const float* x, void* scratch,
           const std::function<void(const float* tile, int64_t m0, int64_t m1)>& pointwise, float* out = nullptr) const;

 private:
  // A 1x1 convolution folded in before the depthwise.
  struct Expansion {
    int64_t cin = 0;
    std::vector<float> weights;  // [C, Cin] until prepare()
    AlignedVector<float> packed;  // sgemm panels of Cin x C
    std::vector<float> bias;
    kernels::ConvF32Epilogue ep;
  };
  int64_t tile_pixels() const;  // at most, a tile in L2
  // For `pixels` output pixels in all: at most tile_pixels(), and the tiles even in number when they are few, so
  // that two or four threads finish together (7x7 pixels of 960 channels: 25 + 24, not 32 + 17).
  int64_t tile_pixels(int64_t pixels) const;
  Shape depthwise_input_shape(const Shape& x) const;
  // How the bands of output rows (with the expansion) are cut and shared out (depthwise_bands.h), and where
  // a slot's depthwise tile lies, after the band's expanded rows (floats).
  struct Bands {
    DepthwiseBands plan;
    int64_t tile_offset = 0, slot_floats = 0;
  };
  Bands bands(const NhwcConvLayout& l) const;
  void run_bands(const RunContext& rc, const NhwcConvLayout& l, const float* x, void* scratch,
                 const kernels::DwconvF32Args& a, const std::function<void(const float*, int64_t, int64_t)>& pointwise,
                 float* out) const;

  ConvGeometry cg_;
  std::unique_ptr<Expansion> ex_;
  std::vector<float> weights_;  // [C, 1, kh, kw] until prepare()
  AlignedVector<float> w_;      // taps x channels
  std::vector<float> bias_;
  kernels::ConvF32Epilogue ep_;
};

}  // namespace optim
