// QConv: the integer form of a QDQ convolution unit DequantizeLinear(x) * DequantizeLinear(W)
// (+ bias) [-> Relu] -> QuantizeLinear, built by qdq_fusion.cc. Per image, group and chunk of output
// pixels: im2col of (x - x_zero) as int16 pairs straight into the integer GEMM's packed-B panels
// (padding is then a plain 0, i.e. real 0), times the weights (minus their zero points, packed once as
// int16 rows), summed exactly in int32 and requantized with per-output-channel scales in the epilogue.
#include <algorithm>

#include "conv_common.h"
#include "qgemm.h"

namespace optim {
namespace {

int32_t int_at(const Tensor& t, int64_t i) {
  return t.dtype == DType::kUint8 ? static_cast<int32_t>(t.data<uint8_t>()[i]) : static_cast<int32_t>(t.data<int8_t>()[i]);
}

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
    a_.assign(static_cast<size_t>(cg_.cout * 2 * kp_), 0);
    for (int64_t co = 0; co < cg_.cout; ++co)
      for (int64_t kk = 0; kk < k; ++kk)
        a_[static_cast<size_t>(co * 2 * kp_ + kk)] = static_cast<int16_t>(int_at(*w, co * k + kk) - qp.w_zero(co));
    scale_.resize(static_cast<size_t>(cg_.cout));
    for (int64_t co = 0; co < cg_.cout; ++co) scale_[co] = qp.x_scale * qp.w_scale(co);
    bias_ = qp.bias(cg_.cout);
    ep_ = qp.epilogue;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {cg_.output_shape(*in[0])}; }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const ConvChunks ch = chunks(*in[0], infer(in)[0]);
    // Per slot: the chunk's packed panels, then one panel's rows before interleaving.
    return static_cast<size_t>(ch.slots * (ch.panels_per_chunk + 1) * panel_elems()) * sizeof(int16_t);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    const WindowGeometry geo = resolve_window(cg_.win, std::vector<int64_t>(xs.begin() + 2, xs.end()));
    const int64_t n_out = ConvGeometry::spatial_numel(ys);
    const int64_t n_in = ConvGeometry::spatial_numel(xs);
    const int64_t cout_g = cg_.cout / cg_.group;
    if (xs[0] == 0 || n_out == 0) return;
    const ConvChunks ch = chunks(xs, ys);
    constexpr int64_t NR = kernels::kIgemmNR;
    const int64_t panels_total = (n_out + NR - 1) / NR;
    int16_t* scratch = static_cast<int16_t*>(rc.scratch());
    uint8_t* y = static_cast<uint8_t*>(out[0].data);  // one byte per element (uint8 or int8)
    rc.parallel_for(static_cast<size_t>(ch.slots), [&](size_t slot) {
      int16_t* packed = scratch + static_cast<int64_t>(slot) * (ch.panels_per_chunk + 1) * panel_elems();
      for (int64_t item = static_cast<int64_t>(slot); item < ch.items; item += ch.slots) {
        const int64_t chunk = item % ch.chunks, img_g = item / ch.chunks;
        const int64_t p0 = chunk * ch.panels_per_chunk, p1 = std::min(panels_total, p0 + ch.panels_per_chunk);
        const int64_t g = img_g % cg_.group;
        pack(in[0], img_g * cg_.cin_g * n_in, geo, p0, p1, n_out, packed);
        kernels::IgemmEpilogue ep = ep_;
        ep.scale_row = scale_.data() + g * cout_g;
        ep.bias_row = bias_.empty() ? nullptr : bias_.data() + g * cout_g;
        const int64_t c0 = p0 * NR;
        rc.kernels.igemm_packed(0, cout_g, 0, p1 - p0, n_out - c0, kp_, a_.data() + g * cout_g * 2 * kp_, 2 * kp_, packed,
                                y + img_g * cout_g * n_out + c0, n_out, ep);
      }
    });
  }

 private:
  // Panel layout (see kernels::IgemmPackedFn): k rows in pairs, each pair NR interleaved (even, odd).
  int64_t panel_elems() const { return kp_ * 2 * kernels::kIgemmNR; }

  // im2col one panel at a time into plain rows (contiguous, so the conversion vectorizes), then
  // interleave row pairs into the panel's (even, odd) pair layout. `packed` is followed by room for
  // one panel of rows.
  void pack(const TensorRef& x, int64_t offset, const WindowGeometry& geo, int64_t p0, int64_t p1, int64_t n_out,
            int16_t* packed) const {
    constexpr int64_t NR = kernels::kIgemmNR;
    const int32_t zx = x_zero_;
    const int64_t k = cg_.k_dim();
    int16_t* rows = packed + (p1 - p0) * panel_elems();
    auto row_at = [](int64_t kk) { return kk * NR; };
    for (int64_t p = p0; p < p1; ++p) {
      if (x_dtype_ == DType::kUint8) {
        im2col_panels<NR, 1>(x.as<uint8_t>() + offset, cg_, geo, p, p + 1, n_out, rows, panel_elems(), row_at,
                             [zx](uint8_t v) { return static_cast<int16_t>(v - zx); });
      } else {
        im2col_panels<NR, 1>(x.as<int8_t>() + offset, cg_, geo, p, p + 1, n_out, rows, panel_elems(), row_at,
                             [zx](int8_t v) { return static_cast<int16_t>(v - zx); });
      }
      if (k & 1) std::fill(rows + k * NR, rows + (k + 1) * NR, int16_t{0});  // the pad row of an odd K
      int16_t* out = packed + (p - p0) * panel_elems();
      for (int64_t q = 0; q < kp_; ++q) {
        const int16_t* r0 = rows + 2 * q * NR;
        const int16_t* r1 = r0 + NR;
        int16_t* o = out + q * 2 * NR;
        for (int64_t j = 0; j < NR; ++j) {
          o[2 * j] = r0[j];
          o[2 * j + 1] = r1[j];
        }
      }
    }
  }

  ConvChunks chunks(const Shape& x, const Shape& y) const {
    return ConvChunks(x[0] * cg_.group, ConvGeometry::spatial_numel(y), kernels::kIgemmNR,
                      panel_elems() * static_cast<int64_t>(sizeof(int16_t)));
  }

  ConvGeometry cg_;
  DType x_dtype_ = DType::kUint8;
  int32_t x_zero_ = 0;
  int64_t kp_ = 0;
  std::vector<int16_t> a_;
  std::vector<float> scale_, bias_;
  kernels::IgemmEpilogue ep_;
};

std::unique_ptr<Op> create_qconv(const Node& n, const Graph& g) { return std::make_unique<QConvImpl>(n, g); }

}  // namespace

OpDef qconv_op_def() { return {"QConv", 1, 1, [](const Node&, const Graph&) { return std::string(); }, create_qconv}; }

}  // namespace optim
