// A depthwise convolution feeding a 1x1 one, in one pass (conv_dw_pw.h).
#include "conv_dw_pw.h"
#include "unit_stages.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <map>

namespace optim {

namespace {

constexpr int64_t kTileBytes = 128 << 10;   // a depthwise tile: in L2 beside the pointwise weights
const int64_t kNoOffset = 0;                // the one tap of a 1x1 convolution's rows

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

DepthwiseStage::DepthwiseStage(const Node& n, const Graph& g, bool hosted_by_pointwise) {
  const size_t w_input = hosted_by_pointwise ? stage_input(n, Stage::kFloatDepthwise, kStageW) : 1;
  const std::string prefix = hosted_by_pointwise ? "dw_" : "";
  const Tensor* w = n.has_input(w_input) ? g.constant(n.inputs[w_input]) : nullptr;
  if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 4)
    throw Error(n.label() + ": its depthwise weights are not a float32 constant of rank 4");
  Node dw;  // the depthwise's own attributes, unprefixed, for ConvGeometry
  dw.name = n.name;
  dw.op = "Conv";
  for (const auto& [name, a] : n.attrs)
    if (name.rfind(prefix, 0) == 0) dw.attrs[name.substr(prefix.size())] = a;
  cg_ = ConvGeometry(dw, w->shape);
  if (cg_.cin_g != 1 || cg_.cout != cg_.group || cg_.spatial != 2)
    throw Error(n.label() + ": its folded convolution " + shape_str(w->shape) + " is not a 2-D depthwise one");
  weights_.assign(w->data<float>(), w->data<float>() + w->numel());
  bias_ = read_conv_bias(n, g, w_input + 1, cg_.cout);
  ep_ = read_conv_epilogue(n, prefix);
  if (!has_stage(n, Stage::kFloatExpansion)) return;
  const Tensor* e = g.constant(stage_value(n, Stage::kFloatExpansion, kStageW));
  if (!e || e->dtype != DType::kFloat32 || e->shape.size() != 4 || e->shape[0] != cg_.cout || e->shape[2] != 1 || e->shape[3] != 1)
    throw Error(n.label() + ": its folded expansion weights are not float32 [" + std::to_string(cg_.cout) + ", Cin, 1, 1]");
  ex_ = std::make_unique<Expansion>();
  ex_->cin = e->shape[1];
  ex_->weights.assign(e->data<float>(), e->data<float>() + e->numel());
  ex_->bias = read_conv_bias(n, g, stage_input(n, Stage::kFloatExpansion, kStageB), cg_.cout);
  ex_->ep = read_conv_epilogue(n, "ex_");
}

Shape DepthwiseStage::depthwise_input_shape(const Shape& x) const {
  if (!ex_) return x;
  if (x.size() != 4 || x.back() != ex_->cin)
    throw Error("X " + shape_str(x) + " (channels last) does not have the folded expansion's " + std::to_string(ex_->cin) + " channels");
  Shape mid = x;
  mid.back() = cg_.cout;
  return mid;
}

void DepthwiseStage::prepare() {
  const int64_t taps = cg_.wshape[2] * cg_.wshape[3];
  w_.resize(static_cast<size_t>(taps * cg_.cout));
  for (int64_t c = 0; c < cg_.cout; ++c)
    for (int64_t t = 0; t < taps; ++t) w_[static_cast<size_t>(t * cg_.cout + c)] = weights_[static_cast<size_t>(c * taps + t)];
  weights_.clear();
  weights_.shrink_to_fit();
  if (ex_) {  // W is [C, Cin]: B of Cin x C, transposed
    ex_->packed.resize(kernels::sgemm_packed_b_floats(ex_->cin, cg_.cout));
    kernels::sgemm_pack_b(ex_->weights.data(), ex_->cin, true, ex_->cin, cg_.cout, ex_->packed.data());
    ex_->weights.clear();
    ex_->weights.shrink_to_fit();
  }
}

DepthwiseStage::Bands DepthwiseStage::bands(const NhwcConvLayout& l) const {
  Bands b;
  b.plan = plan_depthwise_bands(l, cg_.cout * static_cast<int64_t>(sizeof(float)), cg_.cout * static_cast<int64_t>(sizeof(float)));
  b.tile_offset = (kBandCapacity * b.plan.in_rows * l.w * cg_.cout + 15) / 16 * 16;  // BandRows::place's rows
  b.slot_floats = b.tile_offset + b.plan.rows * l.ow * cg_.cout;
  return b;
}

int64_t DepthwiseStage::tile_pixels() const {
  return std::clamp<int64_t>(kTileBytes / (cg_.cout * static_cast<int64_t>(sizeof(float))) / 8 * 8, 8, 256);
}

int64_t DepthwiseStage::tile_pixels(int64_t pixels) const {
  const int64_t most = tile_pixels();
  int64_t tiles = (pixels + most - 1) / most;
  if (tiles % 2 == 1 && tiles < kBandSlots && pixels >= 16) ++tiles;
  return std::max<int64_t>(1, (pixels + tiles - 1) / tiles);
}

size_t DepthwiseStage::scratch_bytes(const Shape& x) const {
  if (ex_) {
    const Bands b = bands(NhwcConvLayout(cg_, depthwise_input_shape(x)));
    return static_cast<size_t>(b.plan.slots * b.slot_floats) * sizeof(float);
  }
  const Shape y = output_shape(x);
  const int64_t pixels = shape_numel(y) / std::max<int64_t>(cg_.cout, 1);
  const int64_t per = tile_pixels(pixels), tiles = (pixels + per - 1) / per;
  return static_cast<size_t>(std::clamp<int64_t>(tiles, 1, kBandSlots) * per * cg_.cout) * sizeof(float);
}

void DepthwiseStage::run(const RunContext& rc, const Shape& xs, const float* x, void* scratch,
                         const std::function<void(const float* tile, int64_t m0, int64_t m1)>& pointwise, float* out) const {
  const NhwcConvLayout l(cg_, depthwise_input_shape(xs));
  const int64_t pixels = l.n * l.pixels(), per = tile_pixels(pixels);
  if (pixels == 0) return;
  const int64_t tiles = (pixels + per - 1) / per;
  kernels::DwconvF32Args a;
  a.g = l.depthwise(cg_.cout);
  a.x = x;
  a.w = w_.data();
  a.ldc = cg_.cout;
  a.ep = ep_;
  a.ep.bias = bias_.empty() ? nullptr : bias_.data();
  if (ex_) return run_bands(rc, l, x, scratch, a, pointwise, out);
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(std::clamp<int64_t>(tiles, 1, kBandSlots)), [&](size_t slot) {
    float* tile = static_cast<float*>(scratch) + static_cast<int64_t>(slot) * per * cg_.cout;
    kernels::DwconvF32Args mine = a;
    for (int64_t t; (t = next.fetch_add(1)) < tiles;) {
      const int64_t m0 = t * per, m1 = std::min(pixels, m0 + per);
      mine.c = out ? out : tile;
      mine.c_row0 = out ? 0 : m0;  // pixel m lands in row m of out, or row m - m0 of the tile
      rc.kernels.dwconv_f32(m0, m1, mine);
      pointwise(out ? out + m0 * cg_.cout : tile, m0, m1);
    }
  });
}

void DepthwiseStage::run_bands(const RunContext& rc, const NhwcConvLayout& l, const float* x, void* scratch,
                               const kernels::DwconvF32Args& a,
                               const std::function<void(const float*, int64_t, int64_t)>& pointwise, float* out) const {
  const Bands b = bands(l);
  const DepthwiseBands& plan = b.plan;
  const int64_t c = cg_.cout;
  kernels::ConvGemmF32Args e;  // the expansion: a plain GEMM over the band's input pixels
  e.w = ex_->packed.data();
  e.n = c;
  e.ldc = c;
  e.ep = ex_->ep;
  e.ep.bias = ex_->bias.empty() ? nullptr : ex_->bias.data();
  const int64_t panels = (c + 15) / 16;
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(plan.slots), [&](size_t slot) {
    float* buffer = static_cast<float*>(scratch) + static_cast<int64_t>(slot) * b.slot_floats;
    kernels::ConvGemmF32Args mine_e = e;
    kernels::DwconvF32Args mine = a;
    float* tile = buffer + b.tile_offset;
    BandRows held;
    auto one_band = [&](int64_t img, int64_t oy0, int64_t oy1) {
      // The input rows these output rows read: those the last band made kept, the rest expanded after them.
      const auto [r0, r1] = depthwise_input_rows(l, oy0, oy1);
      const auto [band, fresh0] = held.place(buffer, l.w * c, kBandCapacity * plan.in_rows, r0, r1);
      const int64_t fresh = (r1 - fresh0) * l.w;
      if (fresh > 0) {
        mine_e.a = {x + (img * l.h + fresh0) * l.w * ex_->cin, fresh, fresh, 0, 1, 1, fresh, ex_->cin, 1, ex_->cin, &kNoOffset};
        mine_e.c = band + (fresh0 - r0) * l.w * c;
        rc.kernels.conv_gemm_f32(0, fresh, 0, panels, mine_e);
      }
      // The band as an image of its own rows: a row above it is padding to the kernel, as is the image's.
      mine.g.h = r1 - r0;
      mine.g.ph = l.ph + r0;
      mine.x = band;
      float* image_out = out ? out + img * l.pixels() * c : nullptr;  // the band's pixels m land in row m
      mine.c = out ? image_out : tile;
      mine.c_row0 = out ? 0 : oy0 * l.ow;
      rc.kernels.dwconv_f32(oy0 * l.ow, oy1 * l.ow, mine);
      pointwise(out ? image_out + oy0 * l.ow * c : tile, img * l.pixels() + oy0 * l.ow, img * l.pixels() + oy1 * l.ow);
    };
    for (int64_t item; (item = next.fetch_add(1)) < plan.items;) {
      held = BandRows{};
      plan.for_each_band(item, one_band);
    }
  });
}

}  // namespace optim
