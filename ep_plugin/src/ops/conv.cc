// Conv (1-D and 2-D, groups, strides, dilations, pads, auto_pad) on float32 as SGEMM:
// per image and group, Y[Cout_g x OH*OW] = W_g[Cout_g x K] * im2col(X)[K x OH*OW], where the im2col
// matrix is written straight into the packed-B panel layout (no separate pack pass). Bias and a
// following Relu (when the plan fuses one) run in the GEMM epilogue. W is the GEMM's A operand as
// stored, so weights and bias are read from the inputs on each run (constants or computed upstream).
#include <algorithm>
#include <cstring>

#include "op.h"
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
    const int64_t items = (*in[0])[0] * group_ * chunks(spatial_numel(out));
    return static_cast<size_t>(slots(items)) * chunk_floats() * sizeof(float);
  }

  // Work items are (image, group, chunk of output pixels). Each packs its chunk's im2col panels into
  // its slot's scratch (sized to stay in L2) and multiplies all of the group's output channels by
  // them, so packing is threaded too and the panels are used while still in cache.
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(xs.begin() + 2, xs.end()));
    const int64_t k = k_dim();
    const int64_t n_out = spatial_numel(ys);
    const int64_t n_in = spatial_numel(xs);
    const int64_t cout_g = cout_ / group_;
    const float* x = in[0].as<float>();
    const float* weights = in[1].as<float>();
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    if (xs[0] == 0 || n_out == 0) return;
    const int64_t n_chunks = chunks(n_out);
    const int64_t items = xs[0] * group_ * n_chunks;
    const int64_t n_slots = slots(items);
    const int64_t panels_total = (n_out + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
    float* scratch = static_cast<float*>(rc.scratch());
    rc.parallel_for(static_cast<size_t>(n_slots), [&](size_t slot) {
      float* packed = scratch + slot * chunk_floats();
      for (int64_t item = static_cast<int64_t>(slot); item < items; item += n_slots) {
        const int64_t chunk = item % n_chunks, img_g = item / n_chunks;
        const int64_t p0 = chunk * panels_per_chunk(), p1 = std::min(panels_total, p0 + panels_per_chunk());
        const int64_t g = img_g % group_;
        im2col_panels(x + img_g * cin_g_ * n_in, geo, p0, p1, n_out, packed);
        kernels::SgemmEpilogue ep;
        ep.bias_row = bias ? bias + g * cout_g : nullptr;
        ep.relu = relu_;
        // The chunk's columns start at p0*NR: view C from there, with the chunk's panels as 0..p1-p0.
        const int64_t c0 = p0 * kernels::kSgemmNR;
        rc.kernels.sgemm_packed(0, cout_g, 0, p1 - p0, n_out - c0, k, weights + g * cout_g * k, k, packed,
                                y + img_g * cout_g * n_out + c0, n_out, ep);
      }
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
  // Panels per work item: about 128 KiB of packed im2col, between 1 and 8 panels.
  int64_t panels_per_chunk() const {
    const int64_t per_panel = k_dim() * kernels::kSgemmNR * static_cast<int64_t>(sizeof(float));
    return std::clamp<int64_t>((128 << 10) / std::max<int64_t>(per_panel, 1), 1, 8);
  }
  size_t chunk_floats() const { return static_cast<size_t>(panels_per_chunk() * k_dim() * kernels::kSgemmNR); }
  int64_t chunks(int64_t n_out) const {
    const int64_t panels = (n_out + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
    return (panels + panels_per_chunk() - 1) / panels_per_chunk();
  }
  static int64_t slots(int64_t items) { return std::clamp<int64_t>(items, 1, 16); }

  // Writes panels [p0, p1) of one group's im2col matrix (K x OH*OW) in the packed-B layout: panel p
  // holds, for each k row (channel, ky, kx), the input values under output pixels p*NR .. p*NR+NR-1.
  // Pixels of one output row read a strided (contiguous when stride is 1) run of one input row, so
  // each run is copied with its padding zeros computed once rather than tested per element.
  void im2col_panels(const float* x, const WindowGeometry& geo, int64_t p0, int64_t p1, int64_t n_out, float* dst) const {
    constexpr int64_t NR = kernels::kSgemmNR;
    const bool two_d = spatial_ == 2;
    const int64_t ih = two_d ? geo.in[0] : 1, iw = geo.in[spatial_ - 1];
    const int64_t ow = geo.out[spatial_ - 1];
    const int64_t kh = two_d ? win_.kernel[0] : 1, kw = win_.kernel[spatial_ - 1];
    const int64_t sh = two_d ? win_.strides[0] : 1, sw = win_.strides[spatial_ - 1];
    const int64_t dh = two_d ? win_.dilations[0] : 1, dw = win_.dilations[spatial_ - 1];
    const int64_t ph = two_d ? geo.pad_begin[0] : 0, pw = geo.pad_begin[spatial_ - 1];
    const int64_t k = k_dim();
    struct Run { int64_t col, len, oy, ox; };
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j0 = p * NR;
      const int64_t cols = std::min(NR, n_out - j0);
      Run runs[NR];
      int64_t n_runs = 0;
      for (int64_t j = 0; j < cols;) {
        const int64_t oy = (j0 + j) / ow, ox = (j0 + j) % ow;
        const int64_t len = std::min(cols - j, ow - ox);
        runs[n_runs++] = {j, len, oy, ox};
        j += len;
      }
      float* out = dst + (p - p0) * k * NR;
      int64_t kk = 0;
      for (int64_t c = 0; c < cin_g_; ++c) {
        const float* xc = x + c * ih * iw;
        for (int64_t ky = 0; ky < kh; ++ky) {
          for (int64_t kx = 0; kx < kw; ++kx, ++kk) {
            float* row = out + kk * NR;
            for (int64_t r = 0; r < n_runs; ++r) {
              const Run& run = runs[r];
              float* o = row + run.col;
              const int64_t iy = run.oy * sh - ph + ky * dh;
              if (iy < 0 || iy >= ih) {
                std::fill(o, o + run.len, 0.f);
                continue;
              }
              const float* xr = xc + iy * iw;
              const int64_t ix0 = run.ox * sw - pw + kx * dw;  // input column of the run's first pixel
              // Valid t: 0 <= ix0 + t*sw < iw.
              const int64_t t_lo = ix0 >= 0 ? 0 : std::min(run.len, (-ix0 + sw - 1) / sw);
              const int64_t t_hi = ix0 >= iw ? 0 : std::clamp<int64_t>((iw - ix0 + sw - 1) / sw, t_lo, run.len);
              std::fill(o, o + t_lo, 0.f);
              if (sw == 1) {
                std::copy(xr + ix0 + t_lo, xr + ix0 + t_hi, o + t_lo);
              } else {
                for (int64_t t = t_lo; t < t_hi; ++t) o[t] = xr[ix0 + t * sw];
              }
              std::fill(o + t_hi, o + run.len, 0.f);
            }
            std::fill(row + cols, row + NR, 0.f);
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
