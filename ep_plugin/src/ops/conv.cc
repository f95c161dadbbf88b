// Conv (1-D and 2-D, groups, strides, dilations, pads, auto_pad) on float32 as SGEMM:
// per image and group, Y[Cout_g x OH*OW] = W_g[Cout_g x K] * im2col(X)[K x OH*OW], where the im2col
// matrix is written straight into the packed-B panel layout (no separate pack pass). Bias and a
// following Relu (when the plan fuses one) run in the GEMM epilogue. W is the GEMM's A operand as
// stored, so weights and bias are read from the inputs on each run (constants or computed upstream).
#include <algorithm>
#include <cstring>

#include "sgemm_driver.h"
#include "spatial.h"

namespace optim {
namespace {

class ConvImpl : public Op {
 public:
  ConvImpl(const Node& n, const Graph& g) {
    const ValueInfo* w = g.value(n.inputs[1]);
    if (!w || !w->has_shape) throw Error(n.label() + ": weights have no known shape");
    wshape_ = w->shape;
    spatial_ = wshape_.size() - 2;
    std::vector<int64_t> kernel(wshape_.begin() + 2, wshape_.end());
    if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
      throw Error(n.label() + ": kernel_shape does not match the weights " + shape_str(wshape_));
    win_ = read_window_attrs(n, kernel);
    group_ = n.attr_i("group", 1);
    cout_ = wshape_[0];
    cin_g_ = wshape_[1];
    if (group_ <= 0 || cout_ % group_ != 0) throw Error(n.label() + ": output channels not divisible by group");
  }

  bool try_fuse_relu() override {
    relu_ = true;
    return true;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (*in[1] != wshape_) throw Error("W " + shape_str(*in[1]) + " is not the declared " + shape_str(wshape_));
    if (in.size() > 2 && in[2] && shape_numel(*in[2]) != cout_)
      throw Error("B " + shape_str(*in[2]) + " does not have " + std::to_string(cout_) + " elements");
    if (x.size() != spatial_ + 2) throw Error("X " + shape_str(x) + " does not match weights " + shape_str(wshape_));
    if (x[1] != cin_g_ * group_)
      throw Error("X " + shape_str(x) + " has " + std::to_string(x[1]) + " channels, weights " + shape_str(wshape_) +
                  " with group " + std::to_string(group_) + " expect " + std::to_string(cin_g_ * group_));
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(x.begin() + 2, x.end()));
    Shape out{x[0], cout_};
    out.insert(out.end(), geo.out.begin(), geo.out.end());
    return {out};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const Shape out = infer(in)[0];
    const int64_t n_out = spatial_numel(out);
    return static_cast<size_t>(workers(in)) * kernels::sgemm_packed_b_floats(k_dim(), n_out) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(xs.begin() + 2, xs.end()));
    const int64_t batch = xs[0];
    const int64_t k = k_dim();
    const int64_t n_out = spatial_numel(ys);
    const int64_t n_in = spatial_numel(xs);
    const int64_t cout_g = cout_ / group_;
    const float* x = in[0].as<float>();
    const float* weights = in[1].as<float>();
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    const size_t pack_floats = kernels::sgemm_packed_b_floats(k, n_out);
    float* scratch = static_cast<float*>(rc.scratch());
    const int64_t tasks = batch * group_;
    const int64_t nworkers = workers({in[0].shape});

    auto one = [&](int64_t t, float* packed, bool threaded) {
      const int64_t img = t / group_, g = t % group_;
      const float* xg = x + (img * group_ + g) * cin_g_ * n_in;
      im2col_packed(xg, geo, packed);
      kernels::SgemmEpilogue ep;
      ep.bias_row = bias ? bias + g * cout_g : nullptr;
      ep.relu = relu_;
      const float* wg = weights + g * cout_g * k;
      float* yg = y + (img * group_ + g) * cout_g * n_out;
      if (threaded) {
        run_sgemm(rc, cout_g, n_out, k, wg, k, packed, yg, n_out, ep);
      } else {
        const int64_t panels = (n_out + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
        rc.kernels.sgemm_packed(0, cout_g, 0, panels, n_out, k, wg, k, packed, yg, n_out, ep);
      }
    };
    if (tasks == 0 || n_out == 0) return;
    if (nworkers == 1) {
      for (int64_t t = 0; t < tasks; ++t) one(t, scratch, true);
      return;
    }
    // Many images or groups (depthwise): each worker owns a scratch slot and a slice of the tasks.
    rc.parallel_for(static_cast<size_t>(nworkers), [&](size_t wkr) {
      for (int64_t t = static_cast<int64_t>(wkr); t < tasks; t += nworkers) one(t, scratch + wkr * pack_floats, false);
    });
  }

 private:
  int64_t k_dim() const {
    int64_t k = cin_g_;
    for (size_t i = 0; i < spatial_; ++i) k *= wshape_[2 + i];
    return k;
  }
  static int64_t spatial_numel(const Shape& s) {
    int64_t n = 1;
    for (size_t i = 2; i < s.size(); ++i) n *= s[i];
    return n;
  }
  int64_t workers(const std::vector<const Shape*>& in) const {
    const int64_t tasks = (*in[0])[0] * group_;
    return tasks <= 1 ? 1 : std::min<int64_t>(tasks, 16);
  }

  // Writes the im2col matrix of one group (K x OH*OW) in packed-B panels of kSgemmNR columns.
  void im2col_packed(const float* x, const WindowGeometry& geo, float* dst) const {
    constexpr int64_t NR = kernels::kSgemmNR;
    const bool two_d = spatial_ == 2;
    const int64_t ih = two_d ? geo.in[0] : 1, iw = geo.in[spatial_ - 1];
    const int64_t ow = geo.out[spatial_ - 1], oh = two_d ? geo.out[0] : 1;
    const int64_t kh = two_d ? win_.kernel[0] : 1, kw = win_.kernel[spatial_ - 1];
    const int64_t sh = two_d ? win_.strides[0] : 1, sw = win_.strides[spatial_ - 1];
    const int64_t dh = two_d ? win_.dilations[0] : 1, dw = win_.dilations[spatial_ - 1];
    const int64_t ph = two_d ? geo.pad_begin[0] : 0, pw = geo.pad_begin[spatial_ - 1];
    const int64_t n_out = oh * ow;
    const int64_t k = k_dim();
    const int64_t panels = (n_out + NR - 1) / NR;
    int64_t iy0[NR], ix0[NR];
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * NR;
      const int64_t cols = std::min(NR, n_out - j0);
      for (int64_t j = 0; j < cols; ++j) {
        iy0[j] = ((j0 + j) / ow) * sh - ph;
        ix0[j] = ((j0 + j) % ow) * sw - pw;
      }
      float* out = dst + p * k * NR;
      int64_t kk = 0;
      for (int64_t c = 0; c < cin_g_; ++c) {
        const float* xc = x + c * ih * iw;
        for (int64_t ky = 0; ky < kh; ++ky) {
          for (int64_t kx = 0; kx < kw; ++kx, ++kk) {
            float* row = out + kk * NR;
            for (int64_t j = 0; j < cols; ++j) {
              const int64_t iy = iy0[j] + ky * dh, ix = ix0[j] + kx * dw;
              row[j] = (iy >= 0 && iy < ih && ix >= 0 && ix < iw) ? xc[iy * iw + ix] : 0.f;
            }
            for (int64_t j = cols; j < NR; ++j) row[j] = 0.f;
          }
        }
      }
    }
  }

  Shape wshape_;
  size_t spatial_ = 2;
  WindowAttrs win_;
  int64_t group_ = 1, cout_ = 0, cin_g_ = 0;
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
