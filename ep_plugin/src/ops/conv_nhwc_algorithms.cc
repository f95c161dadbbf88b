// The float channels-last convolution's algorithms (conv_nhwc_algorithms.h).
#include "conv_nhwc_algorithms.h"

#include <algorithm>
#include <mutex>

#include "conv_bf16.h"
#include "conv_dw_pw.h"
#include "conv_winograd.h"
#include "unit_stages.h"

namespace optim {

void NhwcConvWeights::pack_gemm() {
  const int64_t taps = cg.k_dim() / cg.cin_g, cout_g = cg.cout / cg.group, k = taps * cg.cin_g;
  packed.assign(static_cast<size_t>(cg.group), {});
  for (int64_t gi = 0; gi < cg.group; ++gi) {
    const std::vector<float> b = conv_weights_as_b<float>(cg, gi, cg.cin_g, [&](int64_t i) { return weights[static_cast<size_t>(i)]; });
    packed[static_cast<size_t>(gi)].resize(kernels::sgemm_packed_b_floats(k, cout_g));
    kernels::sgemm_pack_b(b.data(), cout_g, false, k, cout_g, packed[static_cast<size_t>(gi)].data());
  }
}

void NhwcConvWeights::drop_weights() {
  weights.clear();
  weights.shrink_to_fit();
}

kernels::ConvGemmF32Args NhwcConvWeights::gemm_args(const kernels::ConvRows& a, const float* w, float* c,
                                                    const kernels::ConvF32Epilogue& ep, const float* residual) const {
  kernels::ConvGemmF32Args g;
  g.a = a;
  g.w = w;
  g.n = cg.cout;
  g.c = c;
  g.ldc = cg.cout;
  g.ep = ep;
  g.ep.bias = bias_from(0);
  g.ep.residual = residual;
  return g;
}

namespace {

// A one-row GEMM input: `rows` pixels of k contiguous values (a tile in cache).
kernels::ConvRows tile_rows(const float* tile, int64_t rows, int64_t k) {
  static const int64_t kNoOffset = 0;
  return {tile, rows, rows, 0, 1, 1, rows, k, 1, k, &kNoOffset};
}

// A depthwise convolution with its expansion folded in, in bands; with the pool folded in, each band's channel
// sums are added to its image's (in double, under a lock: a few hundred bands).
class ExpandedDepthwise : public NhwcConvAlgorithm {
 public:
  ExpandedDepthwise(const Node& n, const Graph& g, NhwcConvWeights w, bool pooled)
      : NhwcConvAlgorithm(std::move(w)), stage_(n, g, false), pooled_(pooled) {}
  void prepare(const kernels::KernelTable&) override {
    stage_.prepare();
    w_.weights.clear();
  }
  Shape conv_input_shape(const Shape& x) const override {  // the folded expansion's output, C channels per pixel
    Shape mid = x;
    if (mid.size() != 4) throw Error("X " + shape_str(x) + " is not a 2-D channels-last image");
    mid.back() = w_.cg.cout;
    return mid;
  }
  size_t scratch_bytes(const Shape& x) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(x));
    return (stage_.scratch_bytes(x) + 63) / 64 * 64 + (pooled_ ? static_cast<size_t>(l.n * w_.cg.cout) * sizeof(double) : 0);
  }
  void run(const RunContext& rc, const NhwcConvCall& call) const override {
    const int64_t c = w_.cg.cout;
    const NhwcConvLayout l(w_.cg, conv_input_shape(call.xs));
    auto* sums = reinterpret_cast<double*>(reinterpret_cast<uint8_t*>(call.scratch) + (stage_.scratch_bytes(call.xs) + 63) / 64 * 64);
    float* pooled = call.pooled;
    if (pooled) std::fill(sums, sums + l.n * c, 0.0);
    std::mutex mu;
    stage_.run(rc, call.xs, call.x, call.scratch, [&](const float* tile, int64_t m0, int64_t m1) {  // y's rows m0..m1
      if (!pooled) return;
      thread_local std::vector<float> part;
      part.assign(static_cast<size_t>(c), 0.f);
      for (int64_t m = 0; m < m1 - m0; ++m)
        for (int64_t j = 0; j < c; ++j) part[static_cast<size_t>(j)] += tile[m * c + j];
      std::lock_guard<std::mutex> lock(mu);
      double* s = sums + m0 / l.pixels() * c;
      for (int64_t j = 0; j < c; ++j) s[j] += part[static_cast<size_t>(j)];
    }, call.y);
    if (!pooled) return;
    for (int64_t i = 0; i < l.n * c; ++i) pooled[i] = static_cast<float>(sums[i] / static_cast<double>(l.pixels()));
  }

 private:
  DepthwiseStage stage_;
  bool pooled_;
};

class Winograd : public NhwcConvAlgorithm {
 public:
  explicit Winograd(NhwcConvWeights w) : NhwcConvAlgorithm(std::move(w)), f23_(w_.cg) {}
  void prepare(const kernels::KernelTable&) override {
    f23_.prepare(w_.weights.data());
    w_.drop_weights();
  }
  size_t scratch_bytes(const Shape& x) const override { return f23_.scratch_bytes(NhwcConvLayout(w_.cg, x)); }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    kernels::ConvF32Epilogue ep = c.ep;
    ep.bias = w_.bias_from(0);
    f23_.run(rc, l, c.x, c.y, ep, c.scratch);
  }

 private:
  WinogradF23 f23_;
};

// Each tile of depthwise output pixels through this 1x1 convolution as a GEMM, while it is in cache.
class DepthwiseThenPointwise : public NhwcConvAlgorithm {
 public:
  DepthwiseThenPointwise(const Node& n, const Graph& g, NhwcConvWeights w)
      : NhwcConvAlgorithm(std::move(w)), stage_(n, g, true) {
    if (stage_.channels() != w_.cg.cin_g)
      throw Error(n.label() + ": its folded depthwise convolution gives " + std::to_string(stage_.channels()) +
                  " channels, the weights take " + std::to_string(w_.cg.cin_g));
  }
  void prepare(const kernels::KernelTable&) override {
    stage_.prepare();
    w_.pack_gemm();
    w_.drop_weights();
  }
  Shape conv_input_shape(const Shape& x) const override { return stage_.output_shape(x); }
  size_t scratch_bytes(const Shape& x) const override { return (stage_.scratch_bytes(x) + 63) / 64 * 64; }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    const int64_t cin = w_.cg.cin_g, cout = w_.cg.cout, panels = (cout + 15) / 16;
    const float* residual = c.ep.residual;
    stage_.run(rc, c.xs, c.x, c.scratch, [&](const float* tile, int64_t m0, int64_t m1) {
      const int64_t rows = m1 - m0;
      rc.kernels.conv_gemm_f32(0, rows, 0, panels,
                               w_.gemm_args(tile_rows(tile, rows, cin), w_.packed[0].data(), c.y + m0 * cout, c.ep,
                                            residual ? residual + m0 * cout : nullptr));
    });
  }

 private:
  DepthwiseStage stage_;
};

// An algorithm on the conv_gemm_f32 kernel with the weights packed as one set of panels per group.
class OnPackedGemm : public NhwcConvAlgorithm {
 public:
  void prepare(const kernels::KernelTable&) override {
    w_.pack_gemm();
    w_.drop_weights();
  }

 protected:
  explicit OnPackedGemm(NhwcConvWeights w) : NhwcConvAlgorithm(std::move(w)) {}
};

// conv(x * s) for a per-image, per-channel s, in tasks of about kMacsPerTask, each within one image: on large
// images each image's packed weights with row k scaled by s[img][k] (into scratch, one set per image) and the
// GEMM reads x where it lies; on small ones each task scales its own rows into scratch (the same rows of a gated
// copy of x) and the GEMM reads them back while they are in cache.
class ChannelScaled : public OnPackedGemm {
 public:
  explicit ChannelScaled(NhwcConvWeights w) : OnPackedGemm(std::move(w)) {}
  size_t scratch_bytes(const Shape& x) const override {  // every image's rescaled weights, or its gated rows
    const NhwcConvLayout l(w_.cg, x);
    return static_cast<size_t>(l.n) * sizeof(float) *
           (gates_weights(l) ? kernels::sgemm_packed_b_floats(w_.cg.cin_g, w_.cg.cout) : static_cast<size_t>(l.pixels() * w_.cg.cin_g));
  }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    if (!c.scale) throw Error("a channel-scaled convolution was run without its scale");
    const int64_t k = w_.cg.cin_g, cout = w_.cg.cout, panels = (cout + 15) / 16, pixels = l.pixels();
    const Shape& ss = *c.scale->shape;
    if (ss.size() != 4 || ss[1] != 1 || ss[2] != 1 || ss[3] != k || (ss[0] != 1 && ss[0] != l.n))
      throw Error("channel scale " + shape_str(ss) + " is not [1 or " + std::to_string(l.n) + ", 1, 1, " + std::to_string(k) + "]");
    const float* s = c.scale->as<float>();
    const int64_t s_stride = ss[0] == 1 ? 0 : k;
    const bool by_weights = gates_weights(l);
    const int64_t per_set = static_cast<int64_t>(kernels::sgemm_packed_b_floats(k, cout));
    float* prepared = c.scratch;
    if (by_weights) {
      const float* w = w_.packed[0].data();
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
    const kernels::ConvF32Epilogue& ep = c.ep;
    rc.parallel_for(static_cast<size_t>(l.n * chunks), [&](size_t task) {
      const int64_t img = static_cast<int64_t>(task) / chunks, m0 = static_cast<int64_t>(task) % chunks * step;
      const int64_t m1 = std::min(pixels, m0 + step);
      const float* xi = c.x + img * l.h * l.w * l.c;
      float* yi = c.y + img * pixels * cout;
      const float* ri = ep.residual ? ep.residual + img * pixels * cout : nullptr;
      if (by_weights) {
        rc.kernels.conv_gemm_f32(m0, m1, 0, panels,
                                 w_.gemm_args({xi, pixels, l.ow, 0, l.sh, l.sw, l.w, l.c, t.count, t.k_tap, t.offsets.data()},
                                              prepared + img * per_set, yi, ep, ri));
        return;
      }
      float* rows = prepared + (img * pixels + m0) * k;  // a 1x1 stride-1 unpadded convolution: pixel m is row m
      const float* si = s + img * s_stride;
      for (int64_t m = m0; m < m1; ++m) rc.kernels.binary_vv(kernels::BinaryOp::kMul, xi + m * l.c, si, rows + (m - m0) * k, k);
      const int64_t n = m1 - m0;
      rc.kernels.conv_gemm_f32(0, n, 0, panels, w_.gemm_args(tile_rows(rows, n, k), w_.packed[0].data(), yi + m0 * cout, ep,
                                                             ri ? ri + m0 * cout : nullptr));
    });
  }

 private:
  // Whether the gate scales each image's packed weights (K x Cout multiplies per image) rather than its rows
  // (pixels x K): the weights where an image has at least 4 pixels per output channel.
  bool gates_weights(const NhwcConvLayout& l) const { return l.pixels() >= 4 * w_.cg.cout; }
};

class Depthwise : public NhwcConvAlgorithm {
 public:
  explicit Depthwise(NhwcConvWeights w) : NhwcConvAlgorithm(std::move(w)) {}
  void prepare(const kernels::KernelTable&) override {  // taps x channels
    const int64_t taps = w_.cg.k_dim() / w_.cg.cin_g, cout = w_.cg.cout;
    dw_.resize(static_cast<size_t>(taps * cout));
    for (int64_t c = 0; c < cout; ++c)
      for (int64_t t = 0; t < taps; ++t) dw_[static_cast<size_t>(t * cout + c)] = w_.weights[static_cast<size_t>(c * taps + t)];
    w_.drop_weights();
  }
  size_t scratch_bytes(const Shape&) const override { return 0; }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    kernels::DwconvF32Args a;
    a.g = l.depthwise(w_.cg.cout);
    a.x = c.x;
    a.w = dw_.data();
    a.c = c.y;
    a.ldc = w_.cg.cout;
    a.ep = c.ep;
    a.ep.bias = w_.bias_from(0);
    run_dwconv_tasks(rc, l.n * l.pixels(), l.kh * l.kw * w_.cg.cout, [&](int64_t m0, int64_t m1) { rc.kernels.dwconv_f32(m0, m1, a); });
  }

 private:
  AlignedVector<float> dw_;  // taps x channels
};

// A stem reading the partition's channels-first input: bands of output rows of one image, each task padding the
// input rows its band reads (interleaved from the channel planes) into its own slot and running the GEMM on them
// at once, while they are in cache, instead of a padded copy of every image going through memory first.
class NchwStem : public OnPackedGemm {
 public:
  explicit NchwStem(NhwcConvWeights w) : OnPackedGemm(std::move(w)) {}
  Shape conv_input_shape(const Shape& x) const override { return nchw_as_channels_last(x); }
  size_t scratch_bytes(const Shape& x) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(x));
    const ConvBands b = plan_bands(l);
    return static_cast<size_t>(b.slots * slot_floats(l, b)) * sizeof(float);
  }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    const ConvBands b = plan_bands(l);
    const int64_t cin = w_.cg.cin_g, cout = w_.cg.cout, panels = (cout + 15) / 16, slot = slot_floats(l, b);
    const NhwcConvLayout::Taps t = l.taps(cin, cin, l.wp);
    const float* residual = c.ep.residual;
    run_conv_bands(rc, l, b, [&](int64_t s, int64_t img, int64_t oy0, int64_t oy1) {
      float* band = c.scratch + s * slot;
      const int64_t r0 = oy0 * l.sh, r1 = r0 + l.rows_read(oy1 - oy0);  // padded input rows
      prepare_rows(rc, l, c.x + img * l.h * l.w * l.c, band, r0, r1);
      const int64_t first = img * l.pixels() + oy0 * l.ow, pixels = (oy1 - oy0) * l.ow;
      rc.kernels.conv_gemm_f32(0, pixels, 0, panels,
                               w_.gemm_args({band, pixels, l.ow, 0, l.sh, l.sw, l.wp, cin, t.count, t.k_tap, t.offsets.data()},
                                            w_.packed[0].data(), c.y + first * cout, c.ep,
                                            residual ? residual + first * cout : nullptr));
    });
  }

 private:
  static constexpr int64_t kBandBytes = 64 << 10;  // a band's padded input rows: in L1 / L2 for the GEMM
  ConvBands plan_bands(const NhwcConvLayout& l) const {
    return plan_conv_bands(l, l.wp * w_.cg.cin_g * static_cast<int64_t>(sizeof(float)), kBandBytes, l.oh);
  }
  // One slot: a band's padded input rows.
  int64_t slot_floats(const NhwcConvLayout& l, const ConvBands& b) const {
    return (l.rows_read(b.rows) * l.wp * w_.cg.cin_g + 15) / 16 * 16;
  }
  // Padded rows [r0, r1) of one channels-first image as pixels of cin values, into `band` from its start: the
  // padding by fills, each row's channel planes interleaved by the transpose kernel.
  void prepare_rows(const RunContext& rc, const NhwcConvLayout& l, const float* x_img, float* band, int64_t r0,
                    int64_t r1) const {
    const int64_t cin = w_.cg.cin_g, row_floats = l.wp * cin;
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
};

// The conv_gemm_f32 kernels over output pixels, per group, reading the input where it lies when no padding is
// read, else padded copies of as many images as fit the budget at a time; with a bf16 table (precision=bf16), a
// one-group convolution on the bf16 GEMM instead.
class DenseGemm : public NhwcConvAlgorithm {
 public:
  explicit DenseGemm(NhwcConvWeights w) : NhwcConvAlgorithm(std::move(w)) {}
  void prepare(const kernels::KernelTable& kt) override {
    if (conv_runs_bf16(kt, w_.cg)) {
      const int64_t taps = w_.cg.k_dim() / w_.cg.cin_g;
      bf16_ = std::make_unique<ConvBf16>(
          conv_weights_as_b<float>(w_.cg, 0, w_.cg.cin_g, [&](int64_t i) { return w_.weights[static_cast<size_t>(i)]; }),
          taps * w_.cg.cin_g, w_.cg.cout, kt);
    } else {
      w_.pack_gemm();
    }
    w_.drop_weights();
  }
  std::string kernel_name() const override { return bf16_ ? bf16_->kernel_name() : ""; }
  size_t scratch_bytes(const Shape& x) const override {
    const NhwcConvLayout l(w_.cg, x);
    if (!l.reads_padding || bf16_) return 0;
    return static_cast<size_t>(images_per_turn(l) * w_.cg.group * l.prepared_elems(w_.cg.cin_g)) * sizeof(float);
  }
  void run(const RunContext& rc, const NhwcConvCall& c) const override {
    const NhwcConvLayout l(w_.cg, conv_input_shape(c.xs));
    if (l.n == 0 || l.pixels() == 0) return;
    if (bf16_) {
      bf16_->run(rc, l, c.x, c.y, w_.bias_from(0), c.ep, c.ep.residual);
      return;
    }
    const ConvGeometry& cg = w_.cg;
    const int64_t cin_g = cg.cin_g, cout_g = cg.cout / cg.group, taps = l.kh * l.kw;
    const int64_t panels = (cout_g + 15) / 16, mr = rc.kernels.conv_gemm_f32.traits.mr;
    const int64_t np = rc.kernels.conv_gemm_f32.traits.nr / 16;
    const float* residual = c.ep.residual;
    auto gemm = [&](const float* src, int64_t images, int64_t image_stride, int64_t group_stride, int64_t wp,
                    int64_t cs, float* y0) {
      const NhwcConvLayout::Taps t = l.taps(cs, cin_g, wp);
      for (int64_t gi = 0; gi < cg.group; ++gi) {
        kernels::ConvGemmF32Args a;
        a.a = {src + gi * group_stride, l.pixels(), l.ow, image_stride, l.sh, l.sw, wp, cs, t.count, t.k_tap, t.offsets.data()};
        a.w = w_.packed[static_cast<size_t>(gi)].data();
        a.n = cout_g;
        a.c = y0 + gi * cout_g;
        a.ldc = cg.cout;
        a.ep = c.ep;
        a.ep.bias = w_.bias_from(gi * cout_g);
        if (residual) a.ep.residual = residual + (y0 - c.y) + gi * cout_g;  // the same pixels and channels
        run_conv_gemm_tasks(rc, images * l.pixels(), panels, mr, np, 16 * taps * cin_g,
                            static_cast<double>(images * image_stride / cg.group) * sizeof(float),
                            static_cast<double>(t.count * t.k_tap * 16) * sizeof(float),
                            [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) { rc.kernels.conv_gemm_f32(m0, m1, p0, p1, a); });
      }
    };
    if (!l.reads_padding) {  // read the input where it lies
      gemm(c.x, l.n, l.h * l.w * l.c, cin_g, l.w, l.c, c.y);
      return;
    }
    const int64_t per = l.prepared_elems(cin_g), turn = images_per_turn(l);
    for (int64_t i0 = 0; i0 < l.n; i0 += turn) {
      const int64_t images = std::min(turn, l.n - i0);
      prepare_all(rc, l, c.x, i0, images, c.scratch);
      gemm(c.scratch, images, cg.group * per, per, l.wp, cin_g, c.y + i0 * l.pixels() * cg.cout);
    }
  }

 private:
  int64_t images_per_turn(const NhwcConvLayout& l) const {
    const int64_t per_image = w_.cg.group * l.prepared_elems(w_.cg.cin_g) * static_cast<int64_t>(sizeof(float));
    return std::clamp<int64_t>(kNhwcPrepBudgetBytes / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(l.n, 1));
  }
  // The padded copies of images [i0, i0 + images), every group, rows shared out over the pool.
  void prepare_all(const RunContext& rc, const NhwcConvLayout& l, const float* x, int64_t i0, int64_t images, float* dst) const {
    const ConvGeometry& cg = w_.cg;
    const int64_t per = l.prepared_elems(cg.cin_g);
    const int64_t rows_per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(l.wp * cg.cin_g, 1));
    const int64_t chunks = (l.hp + rows_per_task - 1) / rows_per_task, units = images * cg.group;
    rc.parallel_for(static_cast<size_t>(units * chunks), [&](size_t t) {
      const int64_t u = static_cast<int64_t>(t) / chunks, r0 = static_cast<int64_t>(t) % chunks * rows_per_task;
      const int64_t img = i0 + u / cg.group, gi = u % cg.group;
      prepare_nhwc_rows(l, x + img * l.h * l.w * l.c, l.c, gi * cg.cin_g, cg.cin_g, cg.cin_g, dst + u * per, 0.f,
                        CopyValue{}, r0, std::min(l.hp, r0 + rows_per_task));
    });
  }

  std::unique_ptr<ConvBf16> bf16_;
};

}  // namespace

std::unique_ptr<NhwcConvAlgorithm> choose_nhwc_conv_algorithm(const Node& n, const Graph& g, NhwcConvWeights w,
                                                              bool pooled) {
  const ConvGeometry cg = w.cg;  // w moves into the algorithm
  const bool depthwise = cg.cin_g == 1 && cg.cout == cg.group;
  const bool residual = has_stage(n, Stage::kResidual), depthwise_before = has_stage(n, Stage::kFloatDepthwise);
  const bool scaled = has_stage(n, Stage::kChannelScale), nchw = n.attr_i(kNchwInputAttr, 0) != 0;
  const bool winograd = n.attr_s("algorithm", "") == "winograd";
  std::unique_ptr<NhwcConvAlgorithm> expanded;
  if (depthwise && has_stage(n, Stage::kFloatExpansion)) {  // the expansion before it (rewrites/depthwise_pointwise.cc)
    if (residual || cg.spatial != 2)
      throw Error(n.label() + ": a folded expansion needs a 2-D depthwise convolution without residual");
    expanded = std::make_unique<ExpandedDepthwise>(n, g, std::move(w), pooled);
  }
  if (pooled && !expanded) throw Error(n.label() + ": only a depthwise convolution with a folded expansion pools its output");
  if (winograd && !WinogradF23::suits(cg))
    throw Error(n.label() + ": algorithm 'winograd' needs a 3x3 stride-1 convolution of one group");
  if (scaled && (!cg.is_pointwise() || winograd || depthwise_before))
    throw Error(n.label() + ": a folded channel scale needs a 1x1 convolution of stride 1 without padding");
  if (nchw && (depthwise || winograd || scaled || expanded || depthwise_before || cg.spatial != 2 || cg.group != 1))
    throw Error(n.label() + ": only a plain 2-D convolution of one group reads its input channels-first");
  if (depthwise_before && (!cg.is_pointwise() || winograd))
    throw Error(n.label() + ": a folded depthwise convolution needs a 1x1 convolution of stride 1 without padding after it");
  if (expanded) return expanded;
  if (winograd) return std::make_unique<Winograd>(std::move(w));
  if (depthwise_before) return std::make_unique<DepthwiseThenPointwise>(n, g, std::move(w));
  if (scaled) return std::make_unique<ChannelScaled>(std::move(w));
  if (depthwise) return std::make_unique<Depthwise>(std::move(w));
  if (nchw) return std::make_unique<NchwStem>(std::move(w));
  return std::make_unique<DenseGemm>(std::move(w));
}

}  // namespace optim
