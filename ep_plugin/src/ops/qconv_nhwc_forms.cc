// The forms of the integer channels-last convolution unit (qconv_nhwc_forms.h).
#include "qconv_nhwc_forms.h"

#include <atomic>
#include <cmath>
#include <cstring>

namespace optim {

// ---------------------------------------------------------------------------------------------- QConvUnit

QConvUnit::QConvUnit(const Node& n, const Graph& g) {
  const Tensor* w = g.constant(n.inputs[kQGemmW]);
  if (!w) throw Error("weights are not a constant");
  cg = ConvGeometry(n, w->shape);
  const QuantParams qp = read_quant_params(n, g);
  x_dtype = qp.x_dtype;
  x_zero = qp.x_zero;
  wide = qp.centered_rows(*w, cg.cout, cg.k_dim());
  scale = qp.out_scales(cg.cout);
  bias = qp.bias(cg.cout);
  ep = qp.epilogue;
  ep.scale_col = nullptr;  // set per group at run time
  after = QAddAfter(n, g);
  lut = LutAfter(n, ep.out == kernels::QuantOut::kInt8);
  nchw_input = n.attr_i(kNchwInputAttr, 0) != 0;  // a stem reading the partition's NCHW input (rewrites/nchw_stem.cc)
  quantize_input = n.attr_i(kQuantizeInputAttr, 0) != 0;
  x_scale = qp.x_scale;
  if (quantize_input && !nchw_input) throw Error(n.label() + ": quantize_input on a unit that does not read channels-first");
}

kernels::QgemmEpilogue QConvUnit::epilogue() const {
  kernels::QgemmEpilogue e = ep;
  e.scale_col = scale.data();
  e.bias_col = bias.empty() ? nullptr : bias.data();
  return e;
}

bool QConvUnit::depthwise_exact() const {
  const int64_t taps = cg.k_dim();
  for (int64_t c = 0; c < cg.cout; ++c) {
    int64_t sum = 0;
    for (int64_t t = 0; t < taps; ++t) sum += std::abs(int64_t{wide[static_cast<size_t>(c * taps + t)]});
    if (sum * 255 >= (int64_t{1} << 24)) return false;
  }
  return true;
}

void QConvUnit::finish_rows(const RunContext& rc, uint8_t* y, const uint8_t* other, int64_t ldo, int64_t m0, int64_t m1,
                            int64_t j0, int64_t j1) const {
  if (after) after.apply(rc, y, cg.cout, other, ldo, m0, m1, j0, j1);
  if (lut) lut.apply(rc, y, cg.cout, m0, m1, j0, j1);
}

// ---------------------------------------------------------------------------------------------- QGemmForm

QGemmForm::KLayout QGemmForm::k_layout(const QConvUnit& u, int64_t kmult) {
  const ConvGeometry& cg = u.cg;
  KLayout k;
  k.kt = (cg.cin_g + kmult - 1) / kmult * kmult;
  if (!u.nchw_input || cg.spatial != 2 || cg.group != 1 || cg.win.dilations[1] != 1) return k;
  const int64_t kw = cg.wshape[3], run = (kw * cg.cin_g + kmult - 1) / kmult * kmult;
  if (run >= kw * k.kt) return k;
  k.kt = cg.cin_g;
  k.row_run = run;
  k.slack = run - kw * cg.cin_g;
  return k;
}

template <typename T>
std::vector<T> QGemmForm::weights_as_b(const QConvUnit& u, int64_t gi, const KLayout& k) {
  auto weight = [&](int64_t i) { return static_cast<T>(u.wide[static_cast<size_t>(i)]); };
  return k.row_run ? conv_weights_by_rows<T>(u.cg, k.row_run, weight) : conv_weights_as_b<T>(u.cg, gi, k.kt, weight);
}

NhwcConvLayout::Taps QGemmForm::taps(const NhwcConvLayout& l, int64_t cs, int64_t row_pixels) const {
  NhwcConvLayout::Taps t = l.taps(cs, kt_, row_pixels);
  if (k_.row_run) {
    if (t.count != l.kh) throw Error("a stem packed by kernel rows read with another pixel stride");
    t.k_tap = k_.row_run;
  }
  return t;
}

std::vector<std::vector<int8_t>> QGemmForm::u8s8_weights(const QConvUnit& u, const kernels::KernelTable& kt) {
  const ConvGeometry& cg = u.cg;
  const int64_t cout_g = cg.cout / cg.group;
  const bool fits_s8 = std::all_of(u.wide.begin(), u.wide.end(), [](int16_t v) { return v >= -128 && v <= 127; });
  std::vector<std::vector<int8_t>> quad_b;
  if (kt.conv_gemm_u8s8 && fits_s8) {
    const KLayout layout = k_layout(u, 4);
    for (int64_t gi = 0; gi < cg.group; ++gi) quad_b.push_back(weights_as_b<int8_t>(u, gi, layout));
    const int64_t k = static_cast<int64_t>(quad_b[0].size()) / cout_g;
    if (kt.conv_gemm_u8s8.traits.int16_pairs &&
        !std::all_of(quad_b.begin(), quad_b.end(), [&](const auto& b) { return kernels::u8s8_pairs_exact(b.data(), cout_g, k, cout_g); }))
      quad_b.clear();
  }
  return quad_b;
}

void QGemmForm::prepare(const kernels::KernelTable& kt) {
  const ConvGeometry& cg = u_.cg;
  const int64_t cout_g = cg.cout / cg.group;
  const std::vector<std::vector<int8_t>> quad_b = u8s8_weights(u_, kt);
  u8s8_ = !quad_b.empty();
  quantize_pixels_ = kt.quantize_pixels.fn;
  kernel_ = u8s8_ ? kt.conv_gemm_u8s8.name : kt.conv_gemm_s16.name;
  k_ = k_layout(u_, u8s8_ ? 4 : 2);
  kt_ = k_.kt;
  packed_.assign(static_cast<size_t>(cg.group), {});
  comp_.assign(static_cast<size_t>(cg.cout), 0);
  for (int64_t gi = 0; gi < cg.group; ++gi) {
    AlignedVector<uint8_t>& dst = packed_[static_cast<size_t>(gi)];
    if (u8s8_) {
      const std::vector<int8_t>& b = quad_b[static_cast<size_t>(gi)];
      const int64_t k = static_cast<int64_t>(b.size()) / cout_g;
      dst.resize(kernels::qgemm_u8s8_packed_b_bytes(k / 4, cout_g));
      kernels::qgemm_u8s8_pack_b(b.data(), cout_g, k, cout_g, k / 4, reinterpret_cast<int8_t*>(dst.data()));
      // sum_k (x - zx) w = sum_k x' w - zx' sum_k w, with x' the stored uint8 (int8 flipped by +128).
      for (int64_t j = 0; j < cout_g; ++j) {
        int32_t sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) sum += b[static_cast<size_t>(kk * cout_g + j)];
        comp_[static_cast<size_t>(gi * cout_g + j)] = -u_.stored_zero() * sum;
      }
    } else {
      const std::vector<int16_t> b = weights_as_b<int16_t>(u_, gi, k_);
      const int64_t k = static_cast<int64_t>(b.size()) / cout_g;
      dst.resize(kernels::qgemm_s16_packed_b_elems(k / 2, cout_g) * sizeof(int16_t));
      kernels::qgemm_s16_pack_b(b.data(), cout_g, false, k, cout_g, reinterpret_cast<int16_t*>(dst.data()));
    }
  }
}

size_t QGemmForm::scratch_bytes(const NhwcConvLayout& l) const {
  if (reads_in_place(l)) return 0;
  if (runs_in_bands(l)) {
    const ConvBands b = plan_bands(l);
    return static_cast<size_t>(b.slots * band_slot_bytes(l, b));
  }
  return static_cast<size_t>((images_per_turn(l) * u_.cg.group * l.prepared_elems(kt_) + k_.slack) * elem_bytes());
}

void QGemmForm::run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
                    const QAddRows& other) const {
  const ConvGeometry& cg = u_.cg;
  const kernels::QgemmEpilogue ep = u_.epilogue();
  const int64_t cout_g = cg.cout / cg.group, panels = (cout_g + 15) / 16;
  const auto& kernel = u8s8_ ? rc.kernels.conv_gemm_u8s8 : rc.kernels.conv_gemm_s16;
  auto convolve = [&](const uint8_t* src, int64_t images, int64_t image_stride, int64_t group_stride, int64_t wp,
                      int64_t cs, uint8_t* y0) {
    const NhwcConvLayout::Taps t = taps(l, cs, wp);
    for (int64_t gi = 0; gi < cg.group; ++gi) {
      kernels::QgemmEpilogue gep = ep;
      gep.scale_col += gi * cout_g;
      if (gep.bias_col) gep.bias_col += gi * cout_g;
      kernels::ConvGemmQ8Args a;
      a.a = {src + gi * group_stride * elem_bytes(), l.pixels(), l.ow, image_stride, l.sh, l.sw, wp, cs, t.count, t.k_tap, t.offsets.data()};
      a.w = packed_[static_cast<size_t>(gi)].data();
      a.n = cout_g;
      a.c = y0 + gi * cout_g;
      a.ldc = cg.cout;
      a.comp_col = u8s8_ ? comp_.data() + gi * cout_g : nullptr;
      a.ep = &gep;
      run_conv_gemm_tasks(rc, images * l.pixels(), panels, kernel.traits.mr, kernel.traits.nr / 16, 16 * t.count * t.k_tap,
                          static_cast<double>(images * image_stride / cg.group * elem_bytes()),
                          static_cast<double>(t.count * t.k_tap * 16 * elem_bytes()),
                          [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
                            gemm_rows(rc, a, other.at(y0 - y) + gi * cout_g, other.ldo, m0, m1, p0, p1);
                          });
    }
  };
  if (reads_in_place(l)) {
    convolve(static_cast<const uint8_t*>(in[0].data), l.n, l.h * l.w * l.c, cg.cin_g, l.w, l.c, y);
    return;
  }
  uint8_t* prepared = static_cast<uint8_t*>(rc.scratch());
  if (runs_in_bands(l)) {
    convolve_bands(rc, l, in[0], y, other, prepared);
    return;
  }
  const int64_t per = l.prepared_elems(kt_), turn = images_per_turn(l);
  for (int64_t i0 = 0; i0 < l.n; i0 += turn) {
    const int64_t images = std::min(turn, l.n - i0);
    prepare_all(rc, l, in[0], i0, images, prepared);
    clear_slack(prepared + images * cg.group * per * elem_bytes());
    convolve(prepared, images, cg.group * per, per, l.wp, kt_, y + i0 * l.pixels() * cg.cout);
  }
}

int64_t QGemmForm::images_per_turn(const NhwcConvLayout& l) const {
  const int64_t per_image = u_.cg.group * l.prepared_elems(kt_) * elem_bytes();
  return std::clamp<int64_t>(kNhwcPrepBudgetBytes / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(l.n, 1));
}

// The prepared copies of images [i0, i0 + images), every group, rows shared out over the pool.
void QGemmForm::prepare_all(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, int64_t i0, int64_t images,
                            uint8_t* dst) const {
  const int64_t per = l.prepared_elems(kt_), group = u_.cg.group;
  const int64_t rows_per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(l.wp * kt_, 1));
  const int64_t chunks = (l.hp + rows_per_task - 1) / rows_per_task, units = images * group;
  rc.parallel_for(static_cast<size_t>(units * chunks), [&](size_t t) {
    const int64_t u = static_cast<int64_t>(t) / chunks, r0 = static_cast<int64_t>(t) % chunks * rows_per_task;
    prepare_image_rows(l, x, i0 + u / group, u % group, r0, std::min(l.hp, r0 + rows_per_task),
                       dst + u * per * elem_bytes(), 0);
  });
}

void QGemmForm::prepare_image_rows(const NhwcConvLayout& l, const TensorRef& x, int64_t img, int64_t gi, int64_t r0,
                                   int64_t r1, uint8_t* dst, int64_t dst_row0) const {
  const int64_t cin_g = u_.cg.cin_g, c0 = gi * cin_g, image = img * l.h * l.w * l.c;
  const int32_t zx = u_.x_zero;
  if (u_.quantize_input) {  // float32 channels-first (one group): quantized a row of pixels at a time
    kernels::QuantizePixelsArgs a;
    a.scale = u_.x_scale;
    a.zero = zx;
    a.to_u8 = u_.x_dtype == DType::kUint8;
    a.wide = !u8s8_;
    a.kt = kt_;
    a.pad = static_cast<uint8_t>(u_.stored_zero());
    const float* planes = x.as<float>() + image;
    const int64_t plane = l.h * l.w;
    auto rows = [&](auto* d, auto pad) {
      prepare_rows_by(l, cin_g, kt_, d, pad, r0, r1, dst_row0, [&](int64_t iy, int64_t ix, int64_t cols, auto* out) {
        quantize_pixels_(planes + iy * l.w + ix, plane, cin_g, cols, a, out);
      });
    };
    if (u8s8_) rows(dst, a.pad);
    else rows(reinterpret_cast<int16_t*>(dst), int16_t{0});
    return;
  }
  // From the channels-last input, or (a stem, nchw_input) the channels-first one: one image's values.
  auto prepare = [&](auto* src, auto* d, auto pad, auto convert) {
    if (u_.nchw_input) prepare_nchw_rows(l, src + image, cin_g, kt_, d, pad, convert, r0, r1, dst_row0);
    else prepare_nhwc_rows(l, src + image, l.c, c0, cin_g, kt_, d, pad, convert, r0, r1, dst_row0);
  };
  if (u8s8_) {
    const auto pad = static_cast<uint8_t>(u_.stored_zero());
    if (u_.x_dtype == DType::kUint8) prepare(x.as<uint8_t>(), dst, pad, CopyValue{});
    else prepare(x.as<int8_t>(), dst, pad, [](int8_t v) { return static_cast<uint8_t>(static_cast<int32_t>(v) + 128); });
  } else {
    int16_t* d = reinterpret_cast<int16_t*>(dst);
    if (u_.x_dtype == DType::kUint8) prepare(x.as<uint8_t>(), d, int16_t{0}, [zx](uint8_t v) { return static_cast<int16_t>(v - zx); });
    else prepare(x.as<int8_t>(), d, int16_t{0}, [zx](int8_t v) { return static_cast<int16_t>(v - zx); });
  }
}

bool QGemmForm::runs_in_bands(const NhwcConvLayout& l) const {
  const int64_t weight_bytes = l.kh * l.kw * kt_ * ((u_.cg.cout + 15) / 16 * 16) * elem_bytes();
  return u_.cg.group == 1 && !reads_in_place(l) && weight_bytes <= kBandWeightBytes;
}

ConvBands QGemmForm::plan_bands(const NhwcConvLayout& l) const {
  // At least 16 bands in all where the images allow (the threads finish together), for batch 1 too.
  return plan_conv_bands(l, l.wp * kt_ * elem_bytes(), kConvBandBytes, std::max<int64_t>(1, l.n * l.oh / 16));
}

int64_t QGemmForm::band_slot_bytes(const NhwcConvLayout& l, const ConvBands& b) const {
  return ((l.rows_read(b.rows) * l.wp * kt_ + k_.slack) * elem_bytes() + 63) / 64 * 64;
}

void QGemmForm::convolve_bands(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, uint8_t* y,
                               const QAddRows& other, uint8_t* slots) const {
  const ConvBands b = plan_bands(l);
  const int64_t slot_bytes = band_slot_bytes(l, b);
  const kernels::QgemmEpilogue ep = u_.epilogue();
  const NhwcConvLayout::Taps t = taps(l, kt_, l.wp);
  const int64_t cout = u_.cg.cout, panels = (cout + 15) / 16;
  run_conv_bands(rc, l, b, [&](int64_t slot, int64_t img, int64_t oy0, int64_t oy1) {
    uint8_t* band = slots + slot * slot_bytes;
    const int64_t r0 = oy0 * l.sh, r1 = r0 + l.rows_read(oy1 - oy0);  // the prepared rows it reads
    prepare_image_rows(l, x, img, 0, r0, r1, band, r0);
    clear_slack(band + (r1 - r0) * l.wp * kt_ * elem_bytes());
    const int64_t first = img * l.pixels() + oy0 * l.ow, pixels = (oy1 - oy0) * l.ow;
    kernels::ConvGemmQ8Args a;
    a.a = {band, pixels, l.ow, 0, l.sh, l.sw, l.wp, kt_, t.count, t.k_tap, t.offsets.data()};
    a.w = packed_[0].data();
    a.n = cout;
    a.c = y + first * cout;
    a.ldc = cout;
    a.comp_col = u8s8_ ? comp_.data() : nullptr;
    a.ep = &ep;
    gemm_rows(rc, a, other.at(first * cout), other.ldo, 0, pixels, 0, panels);
  });
}

void QGemmForm::gemm_rows(const RunContext& rc, const kernels::ConvGemmQ8Args& a, const uint8_t* other, int64_t ldo,
                          int64_t m0, int64_t m1, int64_t p0, int64_t p1) const {
  const int64_t j0 = p0 * 16, j1 = std::min(a.n, p1 * 16);
  uint8_t* c = static_cast<uint8_t*>(a.c);
  if (u8s8_ && u_.after) {
    if (const std::optional<kernels::ConvQAdd> add = u_.after.in_epilogue(*a.ep, other, ldo)) {
      kernels::ConvGemmQ8Args fused = a;
      fused.add = &*add;
      rc.kernels.conv_gemm_u8s8(m0, m1, p0, p1, fused);
      if (u_.lut) u_.lut.apply(rc, c, u_.cg.cout, m0, m1, j0, j1);
      return;
    }
  }
  (u8s8_ ? rc.kernels.conv_gemm_u8s8 : rc.kernels.conv_gemm_s16)(m0, m1, p0, p1, a);
  u_.finish_rows(rc, c, other, ldo, m0, m1, j0, j1);
}

size_t QGemmForm::pointwise_scratch_bytes(int64_t pixels) const {
  return u8s8_ && u_.x_dtype == DType::kUint8 && kt_ == u_.cg.cin_g ? 0 : static_cast<size_t>(pixels * kt_ * elem_bytes());
}

const void* QGemmForm::pointwise_input(const uint8_t* x, int64_t pixels, void* scratch) const {
  if (!u_.cg.is_pointwise()) throw Error("pointwise rows on a convolution that is not 1x1");
  if (!pointwise_scratch_bytes(pixels)) return x;
  // The rows copied with K padded for the kernel (quads, or int16 pairs).
  const int64_t c = u_.cg.cin_g;
  const bool from_u8 = u_.x_dtype == DType::kUint8;
  if (u8s8_) {
    uint8_t* d = static_cast<uint8_t*>(scratch);
    const auto pad = static_cast<uint8_t>(u_.stored_zero());
    for (int64_t m = 0; m < pixels; ++m) {
      for (int64_t k = 0; k < c; ++k) d[m * kt_ + k] = from_u8 ? x[m * c + k] : static_cast<uint8_t>(x[m * c + k] ^ 0x80);
      for (int64_t k = c; k < kt_; ++k) d[m * kt_ + k] = pad;
    }
  } else {
    int16_t* d = static_cast<int16_t*>(scratch);
    for (int64_t m = 0; m < pixels; ++m) {
      if (from_u8)
        widen_row(x + m * c, c, u_.x_zero, kt_, d + m * kt_);
      else
        widen_row(reinterpret_cast<const int8_t*>(x) + m * c, c, u_.x_zero, kt_, d + m * kt_);
    }
  }
  return scratch;
}

void QGemmForm::pointwise_rows(const RunContext& rc, const uint8_t* x, int64_t pixels, uint8_t* y, const uint8_t* other,
                               int64_t ldo, void* scratch) const {
  if (pixels > 0) pointwise_gemm(rc, pointwise_input(x, pixels, scratch), pixels, y, other, ldo, false);
}

void QGemmForm::pointwise_centered_rows(const RunContext& rc, const int16_t* x, int64_t pixels, uint8_t* y,
                                        const uint8_t* other, int64_t ldo) const {
  if (pixels <= 0) return;
  if (!u_.cg.is_pointwise() || !reads_centered_rows()) throw Error("pointwise_centered_rows on a unit that cannot read them");
  pointwise_gemm(rc, x, pixels, y, other, ldo, false);
}

void QGemmForm::pointwise_rows_as_centered_floats(const RunContext& rc, const uint8_t* x, int64_t pixels, float* y,
                                                  void* scratch) const {
  if (pixels <= 0) return;
  if (!writes_centered_floats()) throw Error("pointwise_rows_as_centered_floats on a unit that cannot write them");
  pointwise_gemm(rc, pointwise_input(x, pixels, scratch), pixels, y, nullptr, 0, true);
}

void QGemmForm::pointwise_gemm(const RunContext& rc, const void* a, int64_t pixels, void* y, const uint8_t* other,
                               int64_t ldo, bool centered_float) const {
  static const int64_t kOneTap = 0;
  kernels::QgemmEpilogue ep = u_.epilogue();
  ep.centered_float = centered_float;
  kernels::ConvGemmQ8Args args;
  args.a = {a, pixels, pixels, pixels * kt_, 1, 1, pixels, kt_, 1, kt_, &kOneTap};  // a plain GEMM (ConvRows)
  args.w = packed_[0].data();
  args.n = u_.cg.cout;
  args.c = y;
  args.ldc = u_.cg.cout;
  args.comp_col = u8s8_ ? comp_.data() : nullptr;
  args.ep = &ep;
  gemm_rows(rc, args, other, ldo, 0, pixels, 0, (u_.cg.cout + 15) / 16);
}

// ---------------------------------------------------------------------------------------------- QGatedForm

int64_t QGatedForm::gated_rows() const { return std::clamp<int64_t>(kGatedBlockBytes / std::max<int64_t>(u_.cg.cin_g, 1), 16, 1024); }

int64_t QGatedForm::gated_slots(const NhwcConvLayout& l) const {
  const int64_t blocks = l.n * ((l.pixels() + gated_rows() - 1) / gated_rows());
  return std::clamp<int64_t>(blocks, 1, kGatedSlots);
}

// A slot: the gated rows, the repeated gate row, the GEMM's own scratch; each part 64-byte aligned.
size_t QGatedForm::gated_part_bytes() const { return (static_cast<size_t>(gated_rows() * u_.cg.cin_g) + 63) / 64 * 64; }

size_t QGatedForm::gated_slot_bytes() const {
  return 2 * gated_part_bytes() + (gemm_.pointwise_scratch_bytes(gated_rows()) + 63) / 64 * 64;
}

size_t QGatedForm::scratch_bytes(const NhwcConvLayout& l) const { return static_cast<size_t>(gated_slots(l)) * gated_slot_bytes(); }

void QGatedForm::run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
                     const QAddRows& other) const {
  const TensorRef& x = in[0];
  const TensorRef& gate = in[gate_.gate_input()];
  const int64_t c = u_.cg.cin_g, cout = u_.cg.cout, per_image = (l.pixels() + gated_rows() - 1) / gated_rows();
  const int64_t gate_stride = gate_.gate_stride(*gate.shape, *x.shape);
  const auto* map = static_cast<const uint8_t*>(x.data);
  const auto* gates = static_cast<const uint8_t*>(gate.data);
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(gated_slots(l)), [&](size_t slot) {
    uint8_t* gated = static_cast<uint8_t*>(rc.scratch()) + slot * gated_slot_bytes();
    uint8_t* repeated = gated + gated_part_bytes();  // the gate row, once per row of a block
    void* pw_scratch = repeated + gated_part_bytes();
    int64_t repeated_image = -1;
    for (int64_t b; (b = next.fetch_add(1)) < l.n * per_image;) {
      const int64_t img = b / per_image, p0 = b % per_image * gated_rows(), rows = std::min(gated_rows(), l.pixels() - p0);
      if (repeated_image != img && (gate_stride || repeated_image < 0))
        for (int64_t r = 0; r < gated_rows(); ++r) std::memcpy(repeated + r * c, gates + img * gate_stride, static_cast<size_t>(c));
      repeated_image = img;
      const int64_t first = img * l.pixels() + p0;
      gate_.apply(rc, map + first * c, repeated, rows, c, gated);
      gemm_.pointwise_rows(rc, gated, rows, y + first * cout, other.at(first * cout), other.ldo, pw_scratch);
    }
  });
}

// ---------------------------------------------------------------------------------------------- QDepthwiseForm

void QDepthwiseForm::prepare(const kernels::KernelTable& kt) {
  const int64_t taps = u_.cg.k_dim(), cout = u_.cg.cout;
  kernel_ = kt.dwconv_q8.name;
  dw_.resize(static_cast<size_t>(taps * cout));
  for (int64_t c = 0; c < cout; ++c)
    for (int64_t t = 0; t < taps; ++t) dw_[static_cast<size_t>(t * cout + c)] = u_.wide[static_cast<size_t>(c * taps + t)];
}

// Bands of output rows over the pool; each converts the input rows its band reads to float32 (x - x_zero,
// exact) once, into a buffer of its thread, then runs the float-summed kernel on them. Strided ones read each
// input value about once: the kernel converts the bytes as it reads them instead.
void QDepthwiseForm::run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
                         const QAddRows& other) const {
  const TensorRef& x = in[0];
  const int64_t cout = u_.cg.cout;
  const kernels::QgemmEpilogue ep = u_.epilogue();
  if (l.sh > 1 && l.sw > 1) {
    kernels::DwconvQ8Args a;
    a.g = l.depthwise(cout);
    a.xq = static_cast<const uint8_t*>(x.data);
    a.x_signed = u_.x_dtype == DType::kInt8;
    a.x_zero = u_.x_zero;
    a.w = dw_.data();
    a.c = y;
    a.ldc = cout;
    a.ep = &ep;
    run_dwconv_tasks(rc, l.n * l.pixels(), l.kh * l.kw * cout, [&](int64_t m0, int64_t m1) {
      rc.kernels.dwconv_q8(m0, m1, a);
      u_.finish_rows(rc, y, other.base, other.ldo, m0, m1, 0, cout);
    });
    return;
  }
  const int64_t units = l.n * l.oh, per_row = l.ow * l.kh * l.kw * cout;
  const int64_t rows_per_task = std::max<int64_t>(1, kMacsPerTask / 4 / std::max<int64_t>(per_row, 1));
  const int64_t tasks = (units + rows_per_task - 1) / rows_per_task;
  const uint8_t* src = static_cast<const uint8_t*>(x.data);  // one byte per element
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    thread_local AlignedVector<float> band;
    const int64_t u1 = std::min(units, (static_cast<int64_t>(t) + 1) * rows_per_task);
    for (int64_t u = static_cast<int64_t>(t) * rows_per_task; u < u1;) {
      const int64_t img = u / l.oh, oy0 = u % l.oh, oy1 = std::min(l.oh, oy0 + (u1 - u));
      const int64_t r0 = std::clamp<int64_t>(oy0 * l.sh - l.ph, 0, l.h);
      const int64_t r1 = std::clamp<int64_t>((oy1 - 1) * l.sh - l.ph + (l.kh - 1) * l.dh + 1, r0, l.h);
      const int64_t row = l.w * l.c;
      band.resize(static_cast<size_t>(std::max<int64_t>((r1 - r0) * row, 1)));
      rc.kernels.dequantize(src + (img * l.h + r0) * row, u_.x_dtype == DType::kUint8, u_.x_zero, 1.f, band.data(),
                            (r1 - r0) * row);
      kernels::DwconvQ8Args a;
      a.g = l.depthwise(cout);
      a.g.h = r1 - r0;  // the band's rows, as an image whose top padding grows by r0
      a.g.ph = l.ph + r0;
      a.x = band.data();
      a.w = dw_.data();
      a.c = y + img * l.pixels() * cout;
      a.ldc = cout;
      a.ep = &ep;
      rc.kernels.dwconv_q8(oy0 * l.ow, oy1 * l.ow, a);
      u_.finish_rows(rc, static_cast<uint8_t*>(a.c), other.at(img * l.pixels() * cout), other.ldo, oy0 * l.ow, oy1 * l.ow,
                     0, cout);
      u += oy1 - oy0;
    }
  });
}

void QDepthwiseForm::band_pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0,
                                 int64_t m1, void* y, bool centered16) const {
  const kernels::QgemmEpilogue ep = u_.epilogue();
  kernels::DwconvQ8Args a;
  a.g = g;
  a.x = x;
  a.w = dw_.data();
  a.c = y;
  a.ldc = u_.cg.cout;
  a.ep = &ep;
  a.centered16 = centered16;
  rc.kernels.dwconv_q8(m0, m1, a);
}

void QDepthwiseForm::pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0, int64_t m1,
                            uint8_t* y) const {
  band_pixels(rc, g, x, m0, m1, y, false);
  u_.finish_rows(rc, y, nullptr, 0, m0, m1, 0, u_.cg.cout);  // a block's depthwise has no QAdd (qconv_block.cc)
}

void QDepthwiseForm::centered_pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0,
                                     int64_t m1, int16_t* y) const {
  if (!writes_centered()) throw Error("centered_pixels on a depthwise unit with a lookup table after it");
  band_pixels(rc, g, x, m0, m1, y, true);
}

}  // namespace optim
