// NhwcConv: float32 Conv on channels-last tensors (conv_nhwc.h), built by the layout rewrite from a Conv
// with constant weights. Dense and grouped convolutions run the conv_gemm_f32 kernels over output pixels
// (weights packed once per group as GEMM panels); depthwise ones (one channel per group) the dwconv_f32
// kernels. Bias, a residual (stage kResidual, unit_stages.h: the output's shape, a folded Add) and a Relu or Clip
// (attributes activation_min / activation_max) run in the epilogue (rewrites/conv_epilogues.cc). Folds from
// later rewrites pick other paths: algorithm="winograd" (conv_winograd.h); a depthwise ("dw_", stage
// kFloatDepthwise) and maybe its expansion ("ex_", kFloatExpansion) before a 1x1, or an expansion before a
// depthwise (conv_dw_pw.h); a squeeze-excite gate on a 1x1's input channels (kChannelScale: per-image scaled
// weights, or gated rows). With precision=bf16 a plain convolution of one group runs on the bf16 GEMM instead
// (conv_bf16.h).
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <limits>

#include "broadcast.h"
#include "../aligned_vector.h"
#include "conv_bf16.h"
#include "conv_nhwc.h"
#include "conv_dw_pw.h"
#include "conv_winograd.h"
#include "unit_stages.h"

namespace optim {

namespace {

class NhwcConvImpl : public Op {
 public:
  NhwcConvImpl(const Node& n, const Graph& g) {
    const Tensor* w = g.constant(n.inputs[1]);
    if (!w || w->dtype != DType::kFloat32) throw Error(n.label() + ": weights are not a float32 constant");
    cg_ = ConvGeometry(n, w->shape);
    weights_.assign(w->data<float>(), w->data<float>() + w->numel());
    bias_ = read_conv_bias(n, g, 2, cg_.cout);
    const kernels::ConvF32Epilogue ep = read_conv_epilogue(n, "");
    lo_ = ep.lo;
    hi_ = ep.hi;
    has_act_ = ep.has_act;
    act_ = ep.act;
    act_params_ = ep.act_params;
    depthwise_ = cg_.cin_g == 1 && cg_.cout == cg_.group;
    residual_input_ = static_cast<int>(stage_input_or_none(n, Stage::kResidual, 0));
    if (depthwise_ && has_stage(n, Stage::kFloatExpansion)) {  // the expansion before it (rewrites/depthwise_pointwise.cc)
      if (residual_input_ >= 0 || cg_.spatial != 2)
        throw Error(n.label() + ": a folded expansion needs a 2-D depthwise convolution without residual");
      expanded_ = std::make_unique<DepthwiseStage>(n, g, false);
      pooled_ = n.outputs.size() > 1;  // its squeeze-excite's global average pool, a second output
    }
    if (n.outputs.size() > 1 && !pooled_) throw Error(n.label() + ": only a depthwise convolution with a folded expansion pools its output");
    if (n.attr_s("algorithm", "") == "winograd") {
      if (!WinogradF23::suits(cg_)) throw Error(n.label() + ": algorithm 'winograd' needs a 3x3 stride-1 convolution of one group");
      winograd_ = std::make_unique<WinogradF23>(cg_);
    }
    scale_input_ = static_cast<int>(stage_input_or_none(n, Stage::kChannelScale, 0));
    channel_scale_ = scale_input_ >= 0;
    if (channel_scale_ && (!cg_.is_pointwise() || winograd_ || has_stage(n, Stage::kFloatDepthwise)))
      throw Error(n.label() + ": a folded channel scale needs a 1x1 convolution of stride 1 without padding");
    nchw_input_ = n.attr_i(kNchwInputAttr, 0) != 0;  // a stem reading the partition's NCHW input (rewrites/nchw_stem.cc)
    if (nchw_input_ && (depthwise_ || winograd_ || channel_scale_ || expanded_ || has_stage(n, Stage::kFloatDepthwise) ||
                        cg_.spatial != 2 || cg_.group != 1))
      throw Error(n.label() + ": only a plain 2-D convolution of one group reads its input channels-first");
    if (has_stage(n, Stage::kFloatDepthwise)) {  // a depthwise convolution folded in before this 1x1 one
      if (!cg_.is_pointwise() || winograd_)
        throw Error(n.label() + ": a folded depthwise convolution needs a 1x1 convolution of stride 1 without padding after it");
      depthwise_before_ = std::make_unique<DepthwiseStage>(n, g, true);
      if (depthwise_before_->channels() != cg_.cin_g)
        throw Error(n.label() + ": its folded depthwise convolution gives " + std::to_string(depthwise_before_->channels()) +
                    " channels, the weights take " + std::to_string(cg_.cin_g));
    }
  }

  void prepare(const kernels::KernelTable& kt) override {
    const int64_t taps = cg_.k_dim() / cg_.cin_g;
    if (depthwise_before_) depthwise_before_->prepare();
    if (expanded_) {
      expanded_->prepare();
      weights_.clear();
      return;
    }
    if (winograd_) {
      winograd_->prepare(weights_.data());
    } else if (depthwise_) {  // taps x channels
      dw_.resize(static_cast<size_t>(taps * cg_.cout));
      for (int64_t c = 0; c < cg_.cout; ++c)
        for (int64_t t = 0; t < taps; ++t) dw_[static_cast<size_t>(t * cg_.cout + c)] = weights_[static_cast<size_t>(c * taps + t)];
    } else if (conv_runs_bf16(kt, cg_) && !depthwise_before_ && !channel_scale_ && !nchw_input_) {
      bf16_ = std::make_unique<ConvBf16>(
          conv_weights_as_b<float>(cg_, 0, cg_.cin_g, [&](int64_t i) { return weights_[static_cast<size_t>(i)]; }),
          taps * cg_.cin_g, cg_.cout, kt);
    } else {
      const int64_t cout_g = cg_.cout / cg_.group, k = taps * cg_.cin_g;
      packed_.assign(static_cast<size_t>(cg_.group), {});
      for (int64_t gi = 0; gi < cg_.group; ++gi) {
        const std::vector<float> b = conv_weights_as_b<float>(cg_, gi, cg_.cin_g, [&](int64_t i) { return weights_[static_cast<size_t>(i)]; });
        packed_[static_cast<size_t>(gi)].resize(kernels::sgemm_packed_b_floats(k, cout_g));
        kernels::sgemm_pack_b(b.data(), cout_g, false, k, cout_g, packed_[static_cast<size_t>(gi)].data());
      }
    }
    weights_.clear();
    weights_.shrink_to_fit();
  }

  std::string kernel_name() const override { return bf16_ ? bf16_->kernel_name() : ""; }

  // The residual: every kernel reads an output element's residual in the epilogue that writes it.
  int in_place_input() const override { return residual_input_; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (*in[1] != cg_.wshape) throw Error("W " + shape_str(*in[1]) + " is not the declared " + shape_str(cg_.wshape));
    const Shape y = nhwc_conv_output_shape(cg_, conv_input_shape(*in[0]));
    if (pooled_) return {y, Shape{y[0], 1, 1, y[3]}};
    // A folded Add: the output is the Add's, its operands broadcast (the same shape almost always).
    return {residual_input_ >= 0 && in[residual_input_] ? broadcast_shapes(y, *in[residual_input_]) : y};
  }

  // Scratch: [the convolution's own output, when a folded Add broadcasts it to a larger shape][prepared input].
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const NhwcConvLayout l(cg_, conv_input_shape(*in[0]));
    size_t prepared = 0;
    if (depthwise_before_ || expanded_)
      prepared = ((depthwise_before_ ? depthwise_before_ : expanded_)->scratch_bytes(*in[0]) + 63) / 64 * 64 +
                 (pooled_ ? static_cast<size_t>(l.n * cg_.cout) * sizeof(double) : 0);
    else if (channel_scale_)  // every image's rescaled weights, or its gated rows
      prepared = static_cast<size_t>(l.n) * sizeof(float) *
                 (gates_weights(l) ? kernels::sgemm_packed_b_floats(cg_.cin_g, cg_.cout) : static_cast<size_t>(l.pixels() * cg_.cin_g));
    else if (winograd_)
      prepared = winograd_->scratch_bytes(l);
    else if (nchw_input_)  // each slot's band of padded rows
      prepared = stem_scratch_bytes(l);
    else if (!depthwise_ && l.reads_padding && !bf16_)
      prepared = static_cast<size_t>(images_per_turn(l) * cg_.group * l.prepared_elems(cg_.cin_g)) * sizeof(float);
    return separate_conv_bytes(in) + prepared;
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const TensorRef* res = residual_input_ >= 0 && in[residual_input_].present() ? &in[residual_input_] : nullptr;
    const float* residual = res ? res->as<float>() : nullptr;
    const Shape conv_shape = nhwc_conv_output_shape(cg_, conv_input_shape(*in[0].shape));
    std::vector<const Shape*> shapes;
    for (const TensorRef& t : in) shapes.push_back(t.shape);
    const size_t separate = separate_conv_bytes(shapes);
    float* prepared = reinterpret_cast<float*>(static_cast<uint8_t*>(rc.scratch()) + separate);
    const TensorRef* scale = channel_scale_ ? &in[scale_input_] : nullptr;
    if (expanded_) {
      run_expanded(rc, *in[0].shape, in[0].as<float>(), out[0].as<float>(), pooled_ ? out[1].as<float>() : nullptr, prepared);
      return;
    }
    if (!residual || (*res->shape == conv_shape && conv_shape == *out[0].shape)) {
      convolve(rc, *in[0].shape, in[0].as<float>(), out[0].as<float>(), residual, lo_, hi_, true, prepared, scale);
      return;
    }
    // The folded Add's operands broadcast: the convolution alone (into the output when it has the output's
    // shape, else into scratch), then the Add with numpy broadcasting, then the clamp.
    const float inf = std::numeric_limits<float>::infinity();
    float* y = out[0].as<float>();
    float* conv = separate ? static_cast<float*>(rc.scratch()) : y;
    convolve(rc, *in[0].shape, in[0].as<float>(), conv, nullptr, -inf, inf, false, prepared, scale);
    for_each_broadcast<2>(*out[0].shape, {&conv_shape, res->shape}, [&](int64_t o, const std::array<int64_t, 2>& off) {
      y[o] = std::min(std::max(conv[off[0]] + residual[off[1]], lo_), hi_);
    });
    if (has_act_) {
      parallel_chunks(rc, shape_numel(*out[0].shape), [&](int64_t s, int64_t e) { rc.kernels.activation(act_, act_params_, y + s, y + s, e - s); });
    }
  }

 private:
  // A one-group GEMM of rows `a` with packed weights w into C rows at c (row stride Cout), bias and the residual's
  // matching rows (or null) in the epilogue.
  kernels::ConvGemmF32Args gemm_args(const kernels::ConvRows& a, const float* w, float* c, const kernels::ConvF32Epilogue& ep,
                                     const float* residual) const {
    kernels::ConvGemmF32Args g;
    g.a = a;
    g.w = w;
    g.n = cg_.cout;
    g.c = c;
    g.ldc = cg_.cout;
    g.ep = ep;
    g.ep.bias = bias_.empty() ? nullptr : bias_.data();
    g.ep.residual = residual;
    return g;
  }

  // Bytes of the convolution's own output when a folded Add's residual makes the output larger (64-aligned).
  size_t separate_conv_bytes(const std::vector<const Shape*>& in) const {
    if (residual_input_ < 0 || !in[residual_input_]) return 0;
    const Shape conv = nhwc_conv_output_shape(cg_, conv_input_shape(*in[0]));
    if (broadcast_shapes(conv, *in[residual_input_]) == conv) return 0;
    return (static_cast<size_t>(shape_numel(conv)) * sizeof(float) + 63) / 64 * 64;
  }

  // What this convolution's own geometry applies to: the folded depthwise's output (a 1x1 convolution that
  // took one), the folded expansion's (a depthwise that took one), or x itself.
  Shape conv_input_shape(const Shape& x) const {
    if (nchw_input_) return nchw_as_channels_last(x);
    if (depthwise_before_) return depthwise_before_->output_shape(x);
    if (expanded_) {  // this depthwise's input: the folded expansion's output, C channels per pixel
      Shape mid = x;
      if (mid.size() != 4) throw Error("X " + shape_str(x) + " is not a 2-D channels-last image");
      mid.back() = cg_.cout;
      return mid;
    }
    return x;
  }

  // y = clamp(conv(x) + bias + residual (same shape as y, or null), lo, hi); `prepared`: scratch for the
  // padded input copies (or the Winograd blocks, or the folded depthwise's tiles).
  // `scale`: the folded squeeze-excite gate (stage kChannelScale, [N or 1, 1, 1, Cin]), or null.
  void convolve(const RunContext& rc, const Shape& xs, const float* x, float* y, const float* residual, float lo, float hi,
                bool apply_act, float* prepared, const TensorRef* scale) const {
    const NhwcConvLayout l(cg_, conv_input_shape(xs));
    if (l.n == 0 || l.pixels() == 0) return;
    kernels::ConvF32Epilogue ep;
    ep.lo = lo;
    ep.hi = hi;
    ep.has_act = has_act_ && apply_act;
    ep.act = act_;
    ep.act_params = act_params_;
    ep.residual = residual;
    ep.ld_residual = cg_.cout;
    if (winograd_) {
      ep.bias = bias_.empty() ? nullptr : bias_.data();
      winograd_->run(rc, l, x, y, ep, prepared);
      return;
    }
    if (depthwise_before_) {  // each tile of depthwise output pixels through this 1x1 convolution as a GEMM
      static const int64_t kNoOffset = 0;
      const int64_t cin = cg_.cin_g, cout = cg_.cout, panels = (cout + 15) / 16;
      depthwise_before_->run(rc, xs, x, prepared, [&](const float* tile, int64_t m0, int64_t m1) {
        const int64_t rows = m1 - m0;
        rc.kernels.conv_gemm_f32(0, rows, 0, panels,
                                 gemm_args({tile, rows, rows, 0, 1, 1, rows, cin, 1, cin, &kNoOffset}, packed_[0].data(),
                                           y + m0 * cout, ep, residual ? residual + m0 * cout : nullptr));
      });
      return;
    }
    if (scale) {
      scaled_convolve(rc, l, x, y, ep, prepared, *scale);
      return;
    }
    if (bf16_) {
      bf16_->run(rc, l, x, y, bias_.empty() ? nullptr : bias_.data(), ep, residual);
      return;
    }
    if (depthwise_) {
      kernels::DwconvF32Args a;
      a.g = l.depthwise(cg_.cout);
      a.x = x;
      a.w = dw_.data();
      a.c = y;
      a.ldc = cg_.cout;
      a.ep = ep;
      a.ep.bias = bias_.empty() ? nullptr : bias_.data();
      run_dwconv_tasks(rc, l.n * l.pixels(), l.kh * l.kw * cg_.cout,
                       [&](int64_t m0, int64_t m1) { rc.kernels.dwconv_f32(m0, m1, a); });
      return;
    }
    const int64_t cin_g = cg_.cin_g, cout_g = cg_.cout / cg_.group, taps = l.kh * l.kw;
    const int64_t panels = (cout_g + 15) / 16, mr = rc.kernels.conv_gemm_f32.traits.mr;
    auto gemm = [&](const float* src, int64_t images, int64_t image_stride, int64_t group_stride, int64_t wp,
                    int64_t cs, float* y0) {
      const NhwcConvLayout::Taps t = l.taps(cs, cin_g, wp);
      for (int64_t gi = 0; gi < cg_.group; ++gi) {
        kernels::ConvGemmF32Args a;
        a.a = {src + gi * group_stride, l.pixels(), l.ow, image_stride, l.sh, l.sw, wp, cs, t.count, t.k_tap, t.offsets.data()};
        a.w = packed_[static_cast<size_t>(gi)].data();
        a.n = cout_g;
        a.c = y0 + gi * cout_g;
        a.ldc = cg_.cout;
        a.ep = ep;
        a.ep.bias = bias_.empty() ? nullptr : bias_.data() + gi * cout_g;
        if (residual) a.ep.residual = residual + (y0 - y) + gi * cout_g;  // the same pixels and channels
        run_conv_gemm_tasks(rc, images * l.pixels(), panels, mr, 16 * taps * cin_g,
                            static_cast<double>(images * image_stride / cg_.group) * sizeof(float),
                            static_cast<double>(t.count * t.k_tap * 16) * sizeof(float),
                            [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) { rc.kernels.conv_gemm_f32(m0, m1, p0, p1, a); });
      }
    };
    if (nchw_input_) {
      convolve_stem_bands(rc, l, x, y, ep, residual, prepared);
      return;
    }
    if (!l.reads_padding) {  // read the input where it lies
      gemm(x, l.n, l.h * l.w * l.c, cin_g, l.w, l.c, y);
      return;
    }
    const int64_t per = l.prepared_elems(cin_g), turn = images_per_turn(l);
    for (int64_t i0 = 0; i0 < l.n; i0 += turn) {
      const int64_t images = std::min(turn, l.n - i0);
      prepare_all(rc, l, x, i0, images, prepared);
      gemm(prepared, images, cg_.group * per, per, l.wp, cin_g, y + i0 * l.pixels() * cg_.cout);
    }
  }

  // The folded expansion and this depthwise in bands, each band's output written into y and, with the pool
  // folded in, its channel sums added to its image's (in double, under a lock: a few hundred bands).
  void run_expanded(const RunContext& rc, const Shape& xs, const float* x, float* y, float* pooled, float* scratch) const {
    const int64_t c = cg_.cout;
    const NhwcConvLayout l(cg_, conv_input_shape(xs));
    auto* sums = reinterpret_cast<double*>(reinterpret_cast<uint8_t*>(scratch) + (expanded_->scratch_bytes(xs) + 63) / 64 * 64);
    if (pooled) std::fill(sums, sums + l.n * c, 0.0);
    std::mutex mu;
    expanded_->run(rc, xs, x, scratch, [&](const float* tile, int64_t m0, int64_t m1) {  // tile: y's rows m0..m1
      if (!pooled) return;
      thread_local std::vector<float> part;
      part.assign(static_cast<size_t>(c), 0.f);
      for (int64_t m = 0; m < m1 - m0; ++m)
        for (int64_t j = 0; j < c; ++j) part[static_cast<size_t>(j)] += tile[m * c + j];
      std::lock_guard<std::mutex> lock(mu);
      double* s = sums + m0 / l.pixels() * c;
      for (int64_t j = 0; j < c; ++j) s[j] += part[static_cast<size_t>(j)];
    }, y);
    if (!pooled) return;
    for (int64_t i = 0; i < l.n * c; ++i) pooled[i] = static_cast<float>(sums[i] / static_cast<double>(l.pixels()));
  }

  // Whether a folded gate scales each image's packed weights (K x Cout multiplies per image) rather than
  // its rows (pixels x K): the weights where an image has at least 4 pixels per output channel.
  bool gates_weights(const NhwcConvLayout& l) const { return l.pixels() >= 4 * cg_.cout; }

  // conv(x * s) for a per-image, per-channel s, in tasks of about kMacsPerTask, each within one image: on
  // large images each image's packed weights with row k scaled by s[img][k] (into `prepared`, one set per
  // image) and the GEMM reads x where it lies; on small ones each task scales its own rows into `prepared`
  // (the same rows of a gated copy of x) and the GEMM reads them back while they are in cache.
  void scaled_convolve(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                       const kernels::ConvF32Epilogue& ep, float* prepared, const TensorRef& scale) const {
    const int64_t k = cg_.cin_g, cout = cg_.cout, panels = (cout + 15) / 16, pixels = l.pixels();
    const Shape& ss = *scale.shape;
    if (ss.size() != 4 || ss[1] != 1 || ss[2] != 1 || ss[3] != k || (ss[0] != 1 && ss[0] != l.n))
      throw Error("channel scale " + shape_str(ss) + " is not [1 or " + std::to_string(l.n) + ", 1, 1, " + std::to_string(k) + "]");
    const float* s = scale.as<float>();
    const int64_t s_stride = ss[0] == 1 ? 0 : k;
    const bool by_weights = gates_weights(l);
    const int64_t per_set = static_cast<int64_t>(kernels::sgemm_packed_b_floats(k, cout));
    if (by_weights) {
      const float* w = packed_[0].data();
      rc.parallel_for(static_cast<size_t>(l.n * panels), [&](size_t t) {
        const int64_t img = static_cast<int64_t>(t) / panels, p = static_cast<int64_t>(t) % panels;
        const float* src = w + p * k * 16;
        float* dst = prepared + img * per_set + p * k * 16;
        const float* si = s + img * s_stride;
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < 16; ++j) dst[r * 16 + j] = src[r * 16 + j] * si[r];
      });
    }
    const NhwcConvLayout::Taps t = l.taps(l.c, k, l.w);
    const int64_t mr = rc.kernels.conv_gemm_f32.traits.mr;
    const double macs = static_cast<double>(l.n * pixels) * static_cast<double>(k * cout);
    const int64_t wanted = static_cast<int64_t>(std::clamp(macs / kMacsPerTask, 1.0, 64.0));
    const int64_t per_image = (wanted + l.n - 1) / l.n;
    const int64_t step = ((pixels + per_image - 1) / per_image + mr - 1) / mr * mr;
    const int64_t chunks = (pixels + step - 1) / step;
    static const int64_t kNoOffset = 0;
    rc.parallel_for(static_cast<size_t>(l.n * chunks), [&](size_t task) {
      const int64_t img = static_cast<int64_t>(task) / chunks, m0 = static_cast<int64_t>(task) % chunks * step;
      const int64_t m1 = std::min(pixels, m0 + step);
      const float* xi = x + img * l.h * l.w * l.c;
      float* yi = y + img * pixels * cout;
      const float* ri = ep.residual ? ep.residual + img * pixels * cout : nullptr;
      if (by_weights) {
        rc.kernels.conv_gemm_f32(m0, m1, 0, panels,
                                 gemm_args({xi, pixels, l.ow, 0, l.sh, l.sw, l.w, l.c, t.count, t.k_tap, t.offsets.data()},
                                           prepared + img * per_set, yi, ep, ri));
        return;
      }
      float* rows = prepared + (img * pixels + m0) * k;  // a 1x1 stride-1 unpadded convolution: pixel m is row m
      const float* si = s + img * s_stride;
      for (int64_t m = m0; m < m1; ++m) rc.kernels.binary_vv(kernels::BinaryOp::kMul, xi + m * l.c, si, rows + (m - m0) * k, k);
      const int64_t n = m1 - m0;
      rc.kernels.conv_gemm_f32(0, n, 0, panels, gemm_args({rows, n, n, 0, 1, 1, n, k, 1, k, &kNoOffset}, packed_[0].data(),
                                                          yi + m0 * cout, ep, ri ? ri + m0 * cout : nullptr));
    });
  }

  // A stem (nchw_input): bands of output rows of one image, each task padding the input rows its band reads
  // (interleaved from the channel planes) into its own slot and running the GEMM on them at once, while they
  // are in cache, instead of a padded copy of every image going through memory first.
  static constexpr int64_t kStemBandBytes = 64 << 10;  // a band's padded input rows: in L1 / L2 for the GEMM
  ConvBands plan_stem_bands(const NhwcConvLayout& l) const {
    return plan_conv_bands(l, l.wp * cg_.cin_g * static_cast<int64_t>(sizeof(float)), kStemBandBytes, l.oh);
  }
  // One slot: a band's padded input rows.
  int64_t stem_slot_floats(const NhwcConvLayout& l, const ConvBands& b) const {
    return (l.rows_read(b.rows) * l.wp * cg_.cin_g + 15) / 16 * 16;
  }
  size_t stem_scratch_bytes(const NhwcConvLayout& l) const {
    const ConvBands b = plan_stem_bands(l);
    return static_cast<size_t>(b.slots * stem_slot_floats(l, b)) * sizeof(float);
  }
  // Padded rows [r0, r1) of one channels-first image as pixels of cin values, into `band` from its start: the
  // padding by fills, each row's channel planes interleaved by the transpose kernel.
  void prepare_stem_rows(const RunContext& rc, const NhwcConvLayout& l, const float* x_img, float* band, int64_t r0,
                         int64_t r1) const {
    const int64_t cin = cg_.cin_g, row_floats = l.wp * cin;
    const int64_t col_lo = std::min(l.wp, l.pw), col_hi = std::clamp<int64_t>(l.pw + l.w, col_lo, l.wp);
    for (int64_t r = r0; r < r1; ++r) {
      float* row = band + (r - r0) * row_floats;
      const int64_t iy = r - l.ph;
      if (iy < 0 || iy >= l.h) {
        std::fill(row, row + row_floats, 0.f);
        continue;
      }
      std::fill(row, row + col_lo * cin, 0.f);
      std::fill(row + col_hi * cin, row + row_floats, 0.f);
      rc.kernels.transpose32(reinterpret_cast<const uint32_t*>(x_img + iy * l.w + (col_lo - l.pw)), l.h * l.w,
                             reinterpret_cast<uint32_t*>(row + col_lo * cin), cin, cin, col_hi - col_lo);
    }
  }

  void convolve_stem_bands(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                           const kernels::ConvF32Epilogue& ep, const float* residual, float* slots) const {
    const ConvBands b = plan_stem_bands(l);
    const int64_t cin = cg_.cin_g, cout = cg_.cout, panels = (cout + 15) / 16, slot_floats = stem_slot_floats(l, b);
    const NhwcConvLayout::Taps t = l.taps(cin, cin, l.wp);
    run_conv_bands(rc, l, b, [&](int64_t slot, int64_t img, int64_t oy0, int64_t oy1) {
      float* band = slots + slot * slot_floats;
      const int64_t r0 = oy0 * l.sh, r1 = r0 + l.rows_read(oy1 - oy0);  // padded input rows
      prepare_stem_rows(rc, l, x + img * l.h * l.w * l.c, band, r0, r1);
      const int64_t first = img * l.pixels() + oy0 * l.ow, pixels = (oy1 - oy0) * l.ow;
      rc.kernels.conv_gemm_f32(0, pixels, 0, panels,
                               gemm_args({band, pixels, l.ow, 0, l.sh, l.sw, l.wp, cin, t.count, t.k_tap, t.offsets.data()},
                                         packed_[0].data(), y + first * cout, ep, residual ? residual + first * cout : nullptr));
    });
  }

  int64_t images_per_turn(const NhwcConvLayout& l) const {
    const int64_t per_image = cg_.group * l.prepared_elems(cg_.cin_g) * static_cast<int64_t>(sizeof(float));
    return std::clamp<int64_t>(kNhwcPrepBudgetBytes / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(l.n, 1));
  }

  // The padded copies of images [i0, i0 + images), every group, rows shared out over the pool.
  void prepare_all(const RunContext& rc, const NhwcConvLayout& l, const float* x, int64_t i0, int64_t images, float* dst) const {
    const int64_t per = l.prepared_elems(cg_.cin_g);
    const int64_t rows_per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(l.wp * cg_.cin_g, 1));
    const int64_t chunks = (l.hp + rows_per_task - 1) / rows_per_task, units = images * cg_.group;
    rc.parallel_for(static_cast<size_t>(units * chunks), [&](size_t t) {
      const int64_t u = static_cast<int64_t>(t) / chunks, r0 = static_cast<int64_t>(t) % chunks * rows_per_task;
      const int64_t img = i0 + u / cg_.group, gi = u % cg_.group;
      prepare_nhwc_rows(l, x + img * l.h * l.w * l.c, l.c, gi * cg_.cin_g, cg_.cin_g, cg_.cin_g, dst + u * per, 0.f,
                        CopyValue{}, r0, std::min(l.hp, r0 + rows_per_task));
    });
  }

  ConvGeometry cg_;
  std::vector<float> weights_;  // [Cout, Cin/g, taps] until prepare()
  std::vector<std::vector<float>> packed_;  // per group: GEMM B panels (dense)
  AlignedVector<float> dw_;                  // taps x channels (depthwise)
  std::vector<float> bias_;
  float lo_ = 0.f, hi_ = 0.f;
  bool has_act_ = false;  // an activation after the clamp (attribute activation, from conv_epilogues.cc)
  kernels::ActivationOp act_ = kernels::ActivationOp::kSilu;
  kernels::ActivationParams act_params_;
  bool depthwise_ = false;
  std::unique_ptr<WinogradF23> winograd_;  // attribute algorithm="winograd" (rewrites/winograd.cc)
  std::unique_ptr<DepthwiseStage> depthwise_before_;  // "dw_" attributes (rewrites/depthwise_pointwise.cc)
  std::unique_ptr<DepthwiseStage> expanded_;  // this depthwise with the expansion before it ("ex_" attributes)
  bool pooled_ = false;  // output 1: the global average pool of output 0 (a squeeze-excite's)
  bool nchw_input_ = false;     // input 0 is [N, C, H, W] (rewrites/nchw_stem.cc)
  bool channel_scale_ = false;  // a squeeze-excite gate on the input channels (rewrites/channel_scales.cc)
  int residual_input_ = -1;     // where the folded Add's operand (stage kResidual) lies in the inputs, or -1
  int scale_input_ = -1;        // where the gate (stage kChannelScale) lies, or -1
  std::unique_ptr<ConvBf16> bf16_;  // precision=bf16: the whole convolution on the bf16 GEMM
};

}  // namespace

std::unique_ptr<Op> create_nhwc_conv(const Node& n, const Graph& g) { return std::make_unique<NhwcConvImpl>(n, g); }

}  // namespace optim
