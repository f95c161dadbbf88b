// NhwcConv: float32 Conv on channels-last tensors (conv_nhwc.h), built by the layout rewrite from a Conv
// with constant weights; how it computes the convolution is one of the algorithms of conv_nhwc_algorithms.h
// (dense and grouped: the conv_gemm_f32 kernels over output pixels; depthwise: the dwconv_f32 kernels; ...),
// chosen once from its folded stages and attributes. Bias, a residual (stage kResidual, unit_stages.h: the output's shape, a folded Add) and a Relu or Clip
// (attributes activation_min / activation_max) run in the epilogue (rewrites/conv_epilogues.cc). Folds from
// later rewrites pick other paths: algorithm="winograd" (conv_winograd.h); a depthwise ("dw_", stage
// kFloatDepthwise) and maybe its expansion ("ex_", kFloatExpansion) before a 1x1, or an expansion before a
// depthwise (conv_dw_pw.h); a squeeze-excite gate on a 1x1's input channels (kChannelScale: per-image scaled
// weights, or gated rows). With precision=bf16 a plain convolution of one group runs on the bf16 GEMM instead
// (conv_bf16.h).
#include <limits>

#include "broadcast.h"
#include "conv_dw_pw.h"
#include "conv_nhwc.h"
#include "conv_nhwc_algorithms.h"
#include "unit_stages.h"

namespace optim {

namespace {

class NhwcConvImpl : public Op {
 public:
  NhwcConvImpl(const Node& n, const Graph& g) {
    const Tensor* w = g.constant(n.inputs[1]);
    if (!w || w->dtype != DType::kFloat32) throw Error(n.label() + ": weights are not a float32 constant");
    NhwcConvWeights weights;
    weights.cg = ConvGeometry(n, w->shape);
    weights.weights.assign(w->data<float>(), w->data<float>() + w->numel());
    weights.bias = read_conv_bias(n, g, 2, weights.cg.cout);
    ep_ = read_conv_epilogue(n, "");
    residual_input_ = static_cast<int>(stage_input_or_none(n, Stage::kResidual, 0));
    scale_input_ = static_cast<int>(stage_input_or_none(n, Stage::kChannelScale, 0));
    pooled_ = n.outputs.size() > 1;  // a squeeze-excite's global average pool of the output, a second output
    algorithm_ = choose_nhwc_conv_algorithm(n, g, std::move(weights), pooled_);
  }

  void prepare(const kernels::KernelTable& kt) override { algorithm_->prepare(kt); }

  std::string kernel_name() const override { return algorithm_->kernel_name(); }

  // The residual: every kernel reads an output element's residual in the epilogue that writes it.
  int in_place_input() const override { return residual_input_; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const ConvGeometry& cg = algorithm_->geometry();
    if (*in[1] != cg.wshape) throw Error("W " + shape_str(*in[1]) + " is not the declared " + shape_str(cg.wshape));
    const Shape y = nhwc_conv_output_shape(cg, algorithm_->conv_input_shape(*in[0]));
    if (pooled_) return {y, Shape{y[0], 1, 1, y[3]}};
    // A folded Add: the output is the Add's, its operands broadcast (the same shape almost always).
    return {residual_input_ >= 0 && in[residual_input_] ? broadcast_shapes(y, *in[residual_input_]) : y};
  }

  // Scratch: [the convolution's own output, when a folded Add broadcasts it to a larger shape][the algorithm's].
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    return separate_conv_bytes(in) + algorithm_->scratch_bytes(*in[0]);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const TensorRef* res = residual_input_ >= 0 && in[residual_input_].present() ? &in[residual_input_] : nullptr;
    const Shape conv_shape = nhwc_conv_output_shape(algorithm_->geometry(), algorithm_->conv_input_shape(*in[0].shape));
    std::vector<const Shape*> shapes;
    for (const TensorRef& t : in) shapes.push_back(t.shape);
    const size_t separate = separate_conv_bytes(shapes);
    float* scratch = reinterpret_cast<float*>(static_cast<uint8_t*>(rc.scratch()) + separate);
    const TensorRef* scale = scale_input_ >= 0 ? &in[scale_input_] : nullptr;
    float* pooled = pooled_ ? out[1].as<float>() : nullptr;
    kernels::ConvF32Epilogue ep = ep_;
    ep.ld_residual = algorithm_->geometry().cout;
    if (!res || (*res->shape == conv_shape && conv_shape == *out[0].shape)) {
      ep.residual = res ? res->as<float>() : nullptr;
      algorithm_->run(rc, {*in[0].shape, in[0].as<float>(), out[0].as<float>(), ep, scratch, scale, pooled});
      return;
    }
    // The folded Add's operands broadcast: the convolution alone (into the output when it has the output's
    // shape, else into scratch), then the Add with numpy broadcasting, then the clamp and the activation.
    const float inf = std::numeric_limits<float>::infinity();
    float* y = out[0].as<float>();
    float* conv = separate ? static_cast<float*>(rc.scratch()) : y;
    kernels::ConvF32Epilogue plain = ep;
    plain.lo = -inf;
    plain.hi = inf;
    plain.has_act = false;
    algorithm_->run(rc, {*in[0].shape, in[0].as<float>(), conv, plain, scratch, scale, pooled});
    const float* residual = res->as<float>();
    for_each_broadcast<2>(*out[0].shape, {&conv_shape, res->shape}, [&](int64_t o, const std::array<int64_t, 2>& off) {
      y[o] = std::min(std::max(conv[off[0]] + residual[off[1]], ep.lo), ep.hi);
    });
    if (ep.has_act) {
      parallel_chunks(rc, shape_numel(*out[0].shape),
                      [&](int64_t s, int64_t e) { rc.kernels.activation(ep.act, ep.act_params, y + s, y + s, e - s); });
    }
  }

 private:
  // Bytes of the convolution's own output when a folded Add's residual makes the output larger (64-aligned).
  size_t separate_conv_bytes(const std::vector<const Shape*>& in) const {
    if (residual_input_ < 0 || !in[residual_input_]) return 0;
    const Shape conv = nhwc_conv_output_shape(algorithm_->geometry(), algorithm_->conv_input_shape(*in[0]));
    if (broadcast_shapes(conv, *in[residual_input_]) == conv) return 0;
    return (static_cast<size_t>(shape_numel(conv)) * sizeof(float) + 63) / 64 * 64;
  }

  std::unique_ptr<NhwcConvAlgorithm> algorithm_;
  kernels::ConvF32Epilogue ep_;  // lo, hi and the activation (attributes, rewrites/conv_epilogues.cc)
  bool pooled_ = false;          // output 1: the global average pool of output 0 (a squeeze-excite's)
  int residual_input_ = -1;      // where the folded Add's operand (stage kResidual) lies in the inputs, or -1
  int scale_input_ = -1;         // where the gate (stage kChannelScale) lies, or -1
};

}  // namespace

std::unique_ptr<Op> create_nhwc_conv(const Node& n, const Graph& g) { return std::make_unique<NhwcConvImpl>(n, g); }

}  // namespace optim
