// Conv (1-D and 2-D, groups, strides, dilations, pads, auto_pad) on float32 as SGEMM:
// per image and group, Y[Cout_g x OH*OW] = W_g[Cout_g x K] * im2col(X)[K x OH*OW], where the im2col
// matrix is written straight into the packed-B panel layout (no separate pack pass). Bias and a
// following Relu (when the plan fuses one) run in the GEMM epilogue. W is the GEMM's A operand as
// stored, so weights and bias are read from the inputs on each run (constants or computed upstream).
#include <algorithm>
#include <cstring>

#include "conv_common.h"

namespace optim {
namespace {

class ConvImpl : public Op {
 public:
  ConvImpl(const Node& n, const Graph& g) {
    const ValueInfo* w = g.value(n.inputs[1]);
    if (!w || !w->has_shape) throw Error(n.label() + ": weights have no known shape");
    cg_ = ConvGeometry(n, w->shape);
  }

  bool try_fuse_relu() override {
    relu_ = true;
    return true;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (*in[1] != cg_.wshape) throw Error("W " + shape_str(*in[1]) + " is not the declared " + shape_str(cg_.wshape));
    if (in.size() > 2 && in[2] && shape_numel(*in[2]) != cg_.cout)
      throw Error("B " + shape_str(*in[2]) + " does not have " + std::to_string(cg_.cout) + " elements");
    return {cg_.output_shape(*in[0])};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const ConvChunks ch = chunks(*in[0], infer(in)[0]);
    return static_cast<size_t>(ch.slots * ch.panels_per_chunk * panel_floats()) * sizeof(float);
  }

  // Each work item packs its chunk's im2col panels into its slot's scratch and multiplies all of the
  // group's output channels by them, so packing is threaded too and the panels are used in cache.
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    const WindowGeometry geo = resolve_window(cg_.win, std::vector<int64_t>(xs.begin() + 2, xs.end()));
    const int64_t k = cg_.k_dim();
    const int64_t n_out = ConvGeometry::spatial_numel(ys);
    const int64_t n_in = ConvGeometry::spatial_numel(xs);
    const int64_t cout_g = cg_.cout / cg_.group;
    const float* x = in[0].as<float>();
    const float* weights = in[1].as<float>();
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    if (xs[0] == 0 || n_out == 0) return;
    const ConvChunks ch = chunks(xs, ys);
    constexpr int64_t NR = kernels::kSgemmNR;
    const int64_t panels_total = (n_out + NR - 1) / NR;
    float* scratch = static_cast<float*>(rc.scratch());
    rc.parallel_for(static_cast<size_t>(ch.slots), [&](size_t slot) {
      float* packed = scratch + static_cast<int64_t>(slot) * ch.panels_per_chunk * panel_floats();
      for (int64_t item = static_cast<int64_t>(slot); item < ch.items; item += ch.slots) {
        const int64_t chunk = item % ch.chunks, img_g = item / ch.chunks;
        const int64_t p0 = chunk * ch.panels_per_chunk, p1 = std::min(panels_total, p0 + ch.panels_per_chunk);
        const int64_t g = img_g % cg_.group;
        im2col_panels<NR, 1>(x + img_g * cg_.cin_g * n_in, cg_, geo, p0, p1, n_out, packed, panel_floats(),
                             [](int64_t kk) { return kk * kernels::kSgemmNR; }, [](float v) { return v; });
        kernels::SgemmEpilogue ep;
        ep.bias_row = bias ? bias + g * cout_g : nullptr;
        ep.relu = relu_;
        // The chunk's columns start at p0*NR: view C from there, with the chunk's panels as 0..p1-p0.
        const int64_t c0 = p0 * NR;
        rc.kernels.sgemm_packed(0, cout_g, 0, p1 - p0, n_out - c0, k, weights + g * cout_g * k, k, packed,
                                y + img_g * cout_g * n_out + c0, n_out, ep);
      }
    });
  }

 private:
  int64_t panel_floats() const { return cg_.k_dim() * kernels::kSgemmNR; }
  ConvChunks chunks(const Shape& x, const Shape& y) const {
    return ConvChunks(x[0] * cg_.group, ConvGeometry::spatial_numel(y), kernels::kSgemmNR,
                      panel_floats() * static_cast<int64_t>(sizeof(float)));
  }

  ConvGeometry cg_;
  bool relu_ = false;
};

std::string check_conv(const Node& n, const Graph& g) {
  if (std::string r = require_float_inputs(g, n); !r.empty()) return r;
  const ValueInfo* w = g.value(n.inputs[1]);
  if (!w || !w->has_shape) return "Conv weights have no known shape";
  for (int64_t d : w->shape)
    if (d < 0) return "Conv weights " + shape_str(w->shape) + " have a dynamic dimension";
  if (w->shape.size() != 3 && w->shape.size() != 4)
    return "Conv with " + std::to_string(static_cast<int64_t>(w->shape.size()) - 2) + " spatial dims is not supported (1-D and 2-D are)";
  return check_auto_pad(n);
}

std::unique_ptr<Op> create_conv(const Node& n, const Graph& g) { return std::make_unique<ConvImpl>(n, g); }

}  // namespace

std::vector<OpDef> conv_op_defs() {
  return {{"Conv", 1, 22, check_conv, create_conv}};  // 22 only adds types
}

}  // namespace optim
