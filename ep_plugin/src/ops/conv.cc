// Conv (1-D and 2-D, groups, strides, dilations, pads, auto_pad) on float32 as a direct convolution
// (conv_direct.h): per image and group the input is copied once into the padded, stride-phased layout
// and the kernel multiplies each output channel's weights by its taps, 8 output pixels at a time. Bias
// and a following Relu (when the plan fuses one) run in the epilogue. The weights are read from the
// input on each run (constants or computed upstream), as rows of K floats.
#include <algorithm>

#include "conv_direct.h"

namespace optim {
namespace {

class ConvImpl : public Op {
 public:
  ConvImpl(const Node& n, const Graph& g) {
    const ValueInfo* w = g.value(n.inputs[1]);
    if (!w || !w->has_shape) throw Error(n.label() + ": weights have no known shape");
    cg_ = ConvGeometry(n, w->shape);
    relu_ = n.has_attr("activation_min");  // a folded Relu (rewrites/conv_epilogues.cc sets 0)
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (*in[1] != cg_.wshape) throw Error("W " + shape_str(*in[1]) + " is not the declared " + shape_str(cg_.wshape));
    if (in.size() > 2 && in[2] && shape_numel(*in[2]) != cg_.cout)
      throw Error("B " + shape_str(*in[2]) + " does not have " + std::to_string(cg_.cout) + " elements");
    return {cg_.output_shape(*in[0])};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const DirectLayout l(cg_, *in[0]);
    return static_cast<size_t>(cg_.k_dim()) * sizeof(int64_t) +
           static_cast<size_t>(images_per_turn(l, (*in[0])[0], cg_.group, sizeof(float)) * cg_.group * l.per_image_group) *
               sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t images = xs[0];
    const int64_t n_out = ConvGeometry::spatial_numel(*out[0].shape);
    if (images == 0 || n_out == 0) return;
    const DirectLayout l(cg_, xs);
    const int64_t k = cg_.k_dim(), cout_g = cg_.cout / cg_.group, groups = cg_.group;
    int64_t* tap_off = static_cast<int64_t*>(rc.scratch());
    float* prepared = reinterpret_cast<float*>(tap_off + k);
    fill_tap_offsets(l, cg_.cin_g, k, tap_off);
    const int64_t n_in = ConvGeometry::spatial_numel(xs);
    const float* x = in[0].as<float>();
    const float* weights = in[1].as<float>();
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    run_direct(
        rc, l, images, groups, cout_g * k * n_out, images_per_turn(l, images, groups, sizeof(float)),
        [&](int64_t i0, int64_t ig) {
          const int64_t img = i0 + ig / groups, g = ig % groups;
          prepare_image_group(l, cg_.cin_g, x + (img * groups + g) * cg_.cin_g * n_in, n_in,
                              prepared + ig * l.per_image_group, 0.f, [](float v) { return v; });
        },
        [&](int64_t i0, int64_t ig, int64_t s0, int64_t s1) {
          const int64_t img = i0 + ig / groups, g = ig % groups;
          kernels::SgemmEpilogue ep;
          ep.bias_row = bias ? bias + g * cout_g : nullptr;
          ep.relu = relu_;
          kernels::ConvF32Args args;
          args.w = weights + g * cout_g * k;
          args.ldw = k;
          args.k = k;
          args.x = prepared + ig * l.per_image_group;
          args.tap_off = tap_off;
          args.segs = l.segments();
          args.c = y + (img * cg_.cout + g * cout_g) * n_out;
          args.ldc = n_out;
          args.ep = &ep;
          rc.kernels.conv_f32(0, cout_g, s0, s1, args);
        });
  }

 private:
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
