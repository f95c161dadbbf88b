// QConv: the integer form of a QDQ convolution unit DequantizeLinear(x) * DequantizeLinear(W)
// (+ bias) [-> Relu] -> QuantizeLinear, built by rewrites/qdq_units.cc. A direct convolution, no im2col: per
// image and group the input is copied once into int16 (x - x_zero, padding a plain 0, i.e. real 0),
// padded and, for a column stride s, split into s column phases, so that every kernel tap of 8
// consecutive output pixels reads 8 consecutive values (kernel_table.h's QconvS16Fn). The weights (minus
// their zero points, as int16 rows, K padded to even) multiply those taps exactly in int32, and the
// epilogue requantizes with per-output-channel scales. The copy costs one pass over the input where an
// im2col costs kernel-size passes. Where the kernel table has AVX-512 VNNI and the weights fit int8
// after their zero point, the prepared input is uint8 instead and the sums run on vpdpbusd (u8 x s8
// quads, with the activation zero point compensated per output channel).
#include <algorithm>

#include "conv_direct.h"
#include "qgemm.h"

namespace optim {
namespace {

class QConvImpl : public Op {
 public:
  QConvImpl(const Node& n, const Graph& g) {
    const Tensor* w = g.constant(n.inputs[kQGemmW]);
    if (!w) throw Error("weights are not a constant");
    cg_ = ConvGeometry(n, w->shape);
    const QuantParams qp = read_quant_params(n, g);
    x_zero_ = qp.x_zero;
    x_dtype_ = qp.x_dtype;
    const int64_t k = cg_.k_dim();
    kp_ = (k + 1) / 2;
    // A rows: per output channel, its K weights minus the zero point, as int16, K padded to even.
    const std::vector<int16_t> rows = qp.centered_rows(*w, cg_.cout, k);
    a_.assign(static_cast<size_t>(cg_.cout * 2 * kp_), 0);
    for (int64_t co = 0; co < cg_.cout; ++co)
      std::copy_n(rows.begin() + co * k, k, a_.begin() + co * 2 * kp_);
    scale_ = qp.out_scales(cg_.cout);
    bias_ = qp.bias(cg_.cout);
    ep_ = qp.epilogue;
  }

  // The VNNI form when the kernel table has it and every weight minus its zero point fits int8.
  void prepare(const kernels::KernelTable& kernels) override {
    u8s8_ = false;
    if (!kernels.qconv_u8s8) return;
    const int64_t k = cg_.k_dim();
    for (int64_t co = 0; co < cg_.cout; ++co)
      for (int64_t kk = 0; kk < k; ++kk) {
        const int16_t v = a_[static_cast<size_t>(co * 2 * kp_ + kk)];
        if (v < -128 || v > 127) return;
      }
    kq_ = (k + 3) / 4;
    a8_.assign(static_cast<size_t>(cg_.cout * 4 * kq_), 0);
    comp_.assign(static_cast<size_t>(cg_.cout), 0);
    // The uint8 the kernel sees: x itself, or x ^ 0x80 = x + 128 for int8 inputs (so is the zero point).
    const int32_t zx = x_zero_ + (x_dtype_ == DType::kInt8 ? 128 : 0);
    for (int64_t co = 0; co < cg_.cout; ++co) {
      int32_t sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const int16_t v = a_[static_cast<size_t>(co * 2 * kp_ + kk)];
        a8_[static_cast<size_t>(co * 4 * kq_ + kk)] = static_cast<int8_t>(v);
        sum += v;
      }
      comp_[static_cast<size_t>(co)] = -zx * sum;
    }
    u8s8_ = true;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {cg_.output_shape(*in[0])}; }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const DirectLayout l(cg_, *in[0]);
    return static_cast<size_t>(taps()) * sizeof(int64_t) +
           static_cast<size_t>(images_per_turn(l, (*in[0])[0], cg_.group, elem_bytes()) * cg_.group * l.per_image_group) * elem_bytes();
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    const int64_t images = xs[0];
    const int64_t n_out = ConvGeometry::spatial_numel(ys);
    if (images == 0 || n_out == 0) return;
    const DirectLayout l(cg_, xs);
    int64_t* tap_off = static_cast<int64_t*>(rc.scratch());
    uint8_t* prepared = reinterpret_cast<uint8_t*>(tap_off + taps());
    fill_taps(l, tap_off);
    run_direct(rc, l, images, cg_.group, cg_.cout / cg_.group * cg_.k_dim() * n_out,
               images_per_turn(l, images, cg_.group, elem_bytes()),
               [&](int64_t i0, int64_t ig) { prepare_input(in[0], l, i0, ig, prepared); },
               [&](int64_t i0, int64_t ig, int64_t s0, int64_t s1) { convolve(l, i0, ig, s0, s1, prepared, tap_off, out[0], rc); });
  }

 private:
  // The prepared input of (image i0 + ig / group, group ig % group), all its channels.
  void prepare_input(const TensorRef& x, const DirectLayout& l, int64_t i0, int64_t ig, uint8_t* prepared) const {
    const int64_t img = i0 + ig / cg_.group, g = ig % cg_.group;
    const int64_t n_in = shape_numel(*x.shape) / std::max<int64_t>((*x.shape)[0] * (*x.shape)[1], 1);
    const int64_t src = (img * cg_.group + g) * cg_.cin_g * n_in;
    uint8_t* dst = prepared + ig * l.per_image_group * elem_bytes();
    const int32_t zx = x_zero_;
    if (u8s8_) {
      if (x_dtype_ == DType::kUint8)
        prepare_image_group(l, cg_.cin_g, x.as<uint8_t>() + src, n_in, dst, static_cast<uint8_t>(zx), [](uint8_t v) { return v; });
      else
        prepare_image_group(l, cg_.cin_g, x.as<int8_t>() + src, n_in, dst, static_cast<uint8_t>(zx + 128),
                            [](int8_t v) { return static_cast<uint8_t>(static_cast<int32_t>(v) + 128); });
    } else {
      int16_t* d16 = reinterpret_cast<int16_t*>(dst);
      if (x_dtype_ == DType::kUint8)
        prepare_image_group(l, cg_.cin_g, x.as<uint8_t>() + src, n_in, d16, int16_t{0},
                            [zx](uint8_t v) { return static_cast<int16_t>(v - zx); });
      else
        prepare_image_group(l, cg_.cin_g, x.as<int8_t>() + src, n_in, d16, int16_t{0},
                            [zx](int8_t v) { return static_cast<int16_t>(v - zx); });
    }
  }

  // Output segments [s0, s1) of (image i0 + ig / group, group ig % group), every output channel of the group.
  void convolve(const DirectLayout& l, int64_t i0, int64_t ig, int64_t s0, int64_t s1, const uint8_t* prepared,
                const int64_t* tap_off, const TensorOut& y, const RunContext& rc) const {
    const int64_t img = i0 + ig / cg_.group, g = ig % cg_.group;
    const int64_t cout_g = cg_.cout / cg_.group;
    const int64_t n_out = l.oh * l.ow;
    kernels::QgemmEpilogue ep = ep_;
    ep.scale_row = scale_.data() + g * cout_g;
    ep.bias_row = bias_.empty() ? nullptr : bias_.data() + g * cout_g;
    kernels::QconvArgs args;
    if (u8s8_) {
      args.a = a8_.data() + g * cout_g * 4 * kq_;
      args.lda = 4 * kq_;
      args.kg = kq_;
      args.comp_row = comp_.data() + g * cout_g;
    } else {
      args.a = a_.data() + g * cout_g * 2 * kp_;
      args.lda = 2 * kp_;
      args.kg = kp_;
    }
    args.x = prepared + ig * l.per_image_group * elem_bytes();
    args.tap_off = tap_off;
    args.segs = l.segments();
    args.c = static_cast<uint8_t*>(y.data) + (img * cg_.cout + g * cout_g) * n_out;  // one byte per element
    args.ldc = n_out;
    args.ep = &ep;
    (u8s8_ ? rc.kernels.qconv_u8s8 : rc.kernels.qconv_s16)(0, cout_g, s0, s1, args);
  }

  int64_t elem_bytes() const { return u8s8_ ? 1 : 2; }
  // Tap offsets: K padded to the kernel's group of 2 (pairs) or 4 (quads).
  int64_t taps() const { return u8s8_ ? 4 * kq_ : 2 * kp_; }

  void fill_taps(const DirectLayout& l, int64_t* tap_off) const { fill_tap_offsets(l, cg_.cin_g, taps(), tap_off); }

  ConvGeometry cg_;
  DType x_dtype_ = DType::kUint8;
  int32_t x_zero_ = 0;
  int64_t kp_ = 0, kq_ = 0;
  std::vector<int16_t> a_;   // s16 pairs form
  bool u8s8_ = false;        // the VNNI form, chosen by prepare()
  std::vector<int8_t> a8_;
  std::vector<int32_t> comp_;
  std::vector<float> scale_, bias_;
  kernels::QgemmEpilogue ep_;
};

std::unique_ptr<Op> create_qconv(const Node& n, const Graph& g) { return std::make_unique<QConvImpl>(n, g); }

}  // namespace

std::unique_ptr<Op> create_qconv_unit(const Node& n, const Graph& g) { return create_qconv(n, g); }

}  // namespace optim
