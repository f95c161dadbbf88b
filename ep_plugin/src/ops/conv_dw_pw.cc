// A depthwise convolution feeding a 1x1 one, in one pass (conv_dw_pw.h).
#include "conv_dw_pw.h"

#include <atomic>
#include <limits>
#include <map>

namespace optim {

namespace {

constexpr int64_t kSlots = 16;              // scratch slots: the most threads one pass uses
constexpr int64_t kTileBytes = 128 << 10;   // a depthwise tile: in L2 beside the pointwise weights

}  // namespace

kernels::ConvF32Epilogue read_conv_epilogue(const Node& n, const std::string& prefix) {
  kernels::ConvF32Epilogue ep;
  ep.lo = n.attr_f(prefix + "activation_min", -std::numeric_limits<float>::infinity());
  ep.hi = n.attr_f(prefix + "activation_max", std::numeric_limits<float>::infinity());
  const std::string act = n.attr_s(prefix + "activation", "");
  if (!act.empty()) {
    static const std::map<std::string, kernels::ActivationOp> kinds = {
        {"HardSigmoid", kernels::ActivationOp::kHardSigmoid}, {"HardSwish", kernels::ActivationOp::kHardSwish},
        {"LeakyRelu", kernels::ActivationOp::kLeakyRelu}, {"Silu", kernels::ActivationOp::kSilu}};
    auto it = kinds.find(act);
    if (it == kinds.end()) throw Error(n.label() + ": activation '" + act + "' is not one the epilogue runs");
    ep.has_act = true;
    ep.act = it->second;
    ep.act_params = {n.attr_f(prefix + "activation_alpha", 0.f), n.attr_f(prefix + "activation_beta", 0.f)};
  }
  return ep;
}

std::vector<float> read_conv_bias(const Node& n, const Graph& g, size_t input, int64_t count) {
  if (!n.has_input(input)) return {};
  const Tensor* b = g.constant(n.inputs[input]);
  if (!b || b->dtype != DType::kFloat32 || b->numel() != count)
    throw Error(n.label() + ": bias '" + n.inputs[input] + "' is not a float32 constant of " + std::to_string(count) + " values");
  return std::vector<float>(b->data<float>(), b->data<float>() + b->numel());
}

DepthwiseStage::DepthwiseStage(const Node& n, const Graph& g) {
  const Tensor* w = n.has_input(4) ? g.constant(n.inputs[4]) : nullptr;
  if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 4)
    throw Error(n.label() + ": its depthwise weights are not a float32 constant of rank 4");
  Node dw;  // the depthwise's own attributes, unprefixed, for ConvGeometry
  dw.name = n.name;
  dw.op = "Conv";
  for (const auto& [name, a] : n.attrs)
    if (name.rfind("dw_", 0) == 0) dw.attrs[name.substr(3)] = a;
  cg_ = ConvGeometry(dw, w->shape);
  if (cg_.cin_g != 1 || cg_.cout != cg_.group || cg_.spatial != 2)
    throw Error(n.label() + ": its folded convolution " + shape_str(w->shape) + " is not a 2-D depthwise one");
  weights_.assign(w->data<float>(), w->data<float>() + w->numel());
  bias_ = read_conv_bias(n, g, 5, cg_.cout);
  ep_ = read_conv_epilogue(n, "dw_");
}

void DepthwiseStage::prepare() {
  const int64_t taps = cg_.wshape[2] * cg_.wshape[3];
  w_.resize(static_cast<size_t>(taps * cg_.cout));
  for (int64_t c = 0; c < cg_.cout; ++c)
    for (int64_t t = 0; t < taps; ++t) w_[static_cast<size_t>(t * cg_.cout + c)] = weights_[static_cast<size_t>(c * taps + t)];
  weights_.clear();
  weights_.shrink_to_fit();
}

int64_t DepthwiseStage::tile_pixels() const {
  return std::clamp<int64_t>(kTileBytes / (cg_.cout * static_cast<int64_t>(sizeof(float))) / 8 * 8, 8, 256);
}

size_t DepthwiseStage::scratch_bytes(const Shape& x) const {
  const Shape y = output_shape(x);
  const int64_t pixels = shape_numel(y) / std::max<int64_t>(cg_.cout, 1);
  const int64_t tiles = (pixels + tile_pixels() - 1) / tile_pixels();
  return static_cast<size_t>(std::clamp<int64_t>(tiles, 1, kSlots) * tile_pixels() * cg_.cout) * sizeof(float);
}

void DepthwiseStage::run(const RunContext& rc, const Shape& xs, const float* x, void* scratch,
                         const std::function<void(const float* tile, int64_t m0, int64_t m1)>& pointwise) const {
  const NhwcConvLayout l(cg_, xs);
  const int64_t pixels = l.n * l.pixels(), per = tile_pixels();
  if (pixels == 0) return;
  const int64_t tiles = (pixels + per - 1) / per;
  kernels::DwconvF32Args a;
  a.g = l.depthwise(cg_.cout);
  a.x = x;
  a.w = w_.data();
  a.ldc = cg_.cout;
  a.ep = ep_;
  a.ep.bias = bias_.empty() ? nullptr : bias_.data();
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(std::clamp<int64_t>(tiles, 1, kSlots)), [&](size_t slot) {
    float* tile = static_cast<float*>(scratch) + static_cast<int64_t>(slot) * per * cg_.cout;
    kernels::DwconvF32Args mine = a;
    for (int64_t t; (t = next.fetch_add(1)) < tiles;) {
      const int64_t m0 = t * per, m1 = std::min(pixels, m0 + per);
      mine.c = tile;
      mine.c_row0 = m0;  // pixel m lands in row m - m0 of the tile
      rc.kernels.dwconv_f32(m0, m1, mine);
      pointwise(tile, m0, m1);
    }
  });
}

}  // namespace optim
