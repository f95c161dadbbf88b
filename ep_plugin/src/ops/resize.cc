// Resize (opset 10-22) on float32: nearest (every nearest_mode) and linear, on the last two dims (the
// others must keep their size: batch and channels), with the coordinate transformations half_pixel,
// pytorch_half_pixel, align_corners and asymmetric; output size from scales or sizes (read before the
// run, see OpDef::shape_inputs). NhwcResize is the same op on channels-last tensors (the layout rewrite
// moves it; its scales / sizes still name ONNX's NCHW dims): there each output pixel mixes whole pixels
// of contiguous channels.
#include <algorithm>
#include <cmath>

#include "op.h"

namespace optim {
namespace {

enum class Mode { kNearest, kLinear };
enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// Per output position along one dim: the two source positions and the second one's weight (nearest: i0
// only, weight 0).
struct Taps1D {
  std::vector<int64_t> i0, i1;
  std::vector<float> w1;
};

class ResizeImpl : public Op {
 public:
  ResizeImpl(const Node& n, bool channels_last) : channels_last_(channels_last) {
    mode_ = n.attr_s("mode", "nearest") == "linear" ? Mode::kLinear : Mode::kNearest;
    const std::string ct = n.attr_s("coordinate_transformation_mode", "half_pixel");
    coord_ = ct == "pytorch_half_pixel" ? Coord::kPytorchHalfPixel
             : ct == "align_corners"    ? Coord::kAlignCorners
             : ct == "asymmetric"       ? Coord::kAsymmetric
                                        : Coord::kHalfPixel;
    if (n.since_version < 11) coord_ = Coord::kAsymmetric;  // opset 10 has only that
    const std::string nm = n.attr_s("nearest_mode", "round_prefer_floor");
    nearest_ = nm == "round_prefer_ceil" ? Nearest::kRoundPreferCeil
               : nm == "floor"           ? Nearest::kFloor
               : nm == "ceil"            ? Nearest::kCeil
                                         : Nearest::kRoundPreferFloor;
    opset10_ = n.since_version < 11;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    (void)in;
    throw Error("Resize needs its scales or sizes before planning");
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const Shape nchw = as_nchw(*in[0]);
    Shape out = nchw;
    resolve(nchw, in, values, &out);
    return {channels_last_ ? to_nhwc(out) : out};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape nchw_in = as_nchw(*in[0].shape), nchw_out = as_nchw(*out[0].shape);
    if (shape_numel(nchw_out) == 0) return;
    // The scales the output size came from: given ones, or out / in per dim (ONNX's rule with sizes).
    std::vector<float> scales(nchw_in.size(), 1.f);
    const TensorRef& sc = in.size() > (opset10_ ? 1u : 2u) ? in[opset10_ ? 1 : 2] : TensorRef{};
    const bool have_scales = sc.present() && sc.numel() > 0;
    for (size_t d = 0; d < nchw_in.size(); ++d)
      scales[d] = have_scales ? sc.as<float>()[d] : static_cast<float>(nchw_out[d]) / static_cast<float>(nchw_in[d]);
    const size_t r = nchw_in.size();
    const int64_t ih = nchw_in[r - 2], iw = nchw_in[r - 1], oh = nchw_out[r - 2], ow = nchw_out[r - 1];
    const Taps1D ty = taps(ih, oh, scales[r - 2]), tx = taps(iw, ow, scales[r - 1]);
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    int64_t outer = 1;
    for (size_t d = 0; d + 2 < r; ++d) outer *= nchw_in[d];
    if (channels_last_) {
      // [N, H, W, C]: outer = N * C here; per output pixel, whole rows of C channels.
      const int64_t c = nchw_in[1], images = outer / std::max<int64_t>(c, 1);
      parallel_chunks(rc, images * oh, [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          const int64_t img = row / oh, oy = row % oh;
          const float* src = x + img * ih * iw * c;
          float* dst = y + (img * oh + oy) * ow * c;
          for (int64_t ox = 0; ox < ow; ++ox) blend_pixel(src, ty, tx, oy, ox, iw, c, dst + ox * c);
        }
      });
      return;
    }
    parallel_chunks(rc, outer * oh, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t plane = row / oh, oy = row % oh;
        const float* src = x + plane * ih * iw;
        float* dst = y + (plane * oh + oy) * ow;
        for (int64_t ox = 0; ox < ow; ++ox) blend_pixel(src, ty, tx, oy, ox, iw, 1, dst + ox);
      }
    });
  }

 private:
  Shape as_nchw(const Shape& s) const {
    if (!channels_last_) return s;
    Shape out = s;
    out.pop_back();
    out.insert(out.begin() + 1, s.back());
    return out;
  }
  static Shape to_nhwc(const Shape& s) {
    Shape out = s;
    out.erase(out.begin() + 1);
    out.push_back(s[1]);
    return out;
  }

  // Output NCHW shape from scales or sizes; only the last two dims may change.
  void resolve(const Shape& x, const std::vector<const Shape*>& in, const ShapeValues& values, Shape* out) const {
    const size_t scales_at = opset10_ ? 1 : 2, sizes_at = 3;
    const std::vector<int64_t>* sizes = sizes_at < values.size() ? values[sizes_at] : nullptr;
    const bool has_scales = scales_at < in.size() && in[scales_at] && shape_numel(*in[scales_at]) > 0;
    if (sizes && !sizes->empty()) {
      if (sizes->size() != x.size()) throw Error("sizes has " + std::to_string(sizes->size()) + " values for rank " + std::to_string(x.size()));
      for (size_t d = 0; d < x.size(); ++d) (*out)[d] = (*sizes)[d];
    } else if (has_scales) {
      const std::vector<int64_t>* sv = scales_at < values.size() ? values[scales_at] : nullptr;
      if (!sv) throw Error("the scales are not available before the run");
      if (sv->size() != x.size()) throw Error("scales has " + std::to_string(sv->size()) + " values for rank " + std::to_string(x.size()));
      for (size_t d = 0; d < x.size(); ++d) {
        const float s = float_from_bits((*sv)[d]);
        if (!(s > 0.f)) throw Error("scale " + std::to_string(s) + " is not positive");
        (*out)[d] = static_cast<int64_t>(std::floor(static_cast<float>(x[d]) * s));
      }
    } else {
      throw Error("Resize has neither scales nor sizes");
    }
    for (size_t d = 0; d + 2 < x.size(); ++d)
      if ((*out)[d] != x[d]) throw Error("only the last two dims can be resized, not dim " + std::to_string(d));
  }

  // ONNX's transformations with ONNX Runtime's length_resized: the output size (ONNX's reference takes
  // in * scale unrounded, which differs when that is not an integer; models are validated on ORT).
  float original(int64_t o, int64_t in, int64_t out, float scale) const {
    const float xo = static_cast<float>(o);
    switch (coord_) {
      case Coord::kHalfPixel: return (xo + 0.5f) / scale - 0.5f;
      case Coord::kPytorchHalfPixel: return out > 1 ? (xo + 0.5f) / scale - 0.5f : 0.f;
      case Coord::kAlignCorners: return out == 1 ? 0.f : xo * static_cast<float>(in - 1) / static_cast<float>(out - 1);
      case Coord::kAsymmetric: return xo / scale;
    }
    return 0.f;
  }

  int64_t nearest_index(float v, int64_t in) const {
    float f;
    switch (nearest_) {
      case Nearest::kRoundPreferFloor: f = (v == std::floor(v) + 0.5f) ? std::floor(v) : std::round(v); break;
      case Nearest::kRoundPreferCeil: f = std::round(v); break;
      case Nearest::kFloor: f = std::floor(v); break;
      default: f = std::ceil(v); break;
    }
    return std::clamp<int64_t>(static_cast<int64_t>(f), 0, in - 1);
  }

  Taps1D taps(int64_t in, int64_t out, float scale) const {
    Taps1D t;
    t.i0.resize(static_cast<size_t>(out));
    t.i1.resize(static_cast<size_t>(out));
    t.w1.assign(static_cast<size_t>(out), 0.f);
    for (int64_t o = 0; o < out; ++o) {
      const float v = original(o, in, out, scale);
      if (mode_ == Mode::kNearest) {
        t.i0[o] = t.i1[o] = nearest_index(v, in);
        continue;
      }
      const float c = std::clamp(v, 0.f, static_cast<float>(in - 1));
      const int64_t lo = std::min<int64_t>(static_cast<int64_t>(c), in - 1);
      t.i0[o] = lo;
      t.i1[o] = std::min<int64_t>(lo + 1, in - 1);
      t.w1[o] = c - static_cast<float>(lo);
    }
    return t;
  }

  // One output pixel of `c` interleaved channels (1 for NCHW planes): bilinear (or nearest) mix of four.
  static void blend_pixel(const float* src, const Taps1D& ty, const Taps1D& tx, int64_t oy, int64_t ox, int64_t iw,
                          int64_t c, float* __restrict dst) {
    const float wy = ty.w1[oy], wx = tx.w1[ox];
    const float* a = src + (ty.i0[oy] * iw + tx.i0[ox]) * c;
    const float* b = src + (ty.i0[oy] * iw + tx.i1[ox]) * c;
    const float* p = src + (ty.i1[oy] * iw + tx.i0[ox]) * c;
    const float* q = src + (ty.i1[oy] * iw + tx.i1[ox]) * c;
    const float w00 = (1.f - wy) * (1.f - wx), w01 = (1.f - wy) * wx, w10 = wy * (1.f - wx), w11 = wy * wx;
    for (int64_t j = 0; j < c; ++j) dst[j] = w00 * a[j] + w01 * b[j] + w10 * p[j] + w11 * q[j];
  }

  Mode mode_;
  Coord coord_;
  Nearest nearest_;
  bool opset10_ = false;
  bool channels_last_;
};

std::string check_resize(const Node& n, const Graph& g) {
  if (std::string r = require_float(g, n, 0); !r.empty()) return r;
  const std::string mode = n.attr_s("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return "Resize mode '" + mode + "' is not supported (nearest and linear are)";
  const std::string ct = n.attr_s("coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "pytorch_half_pixel" && ct != "align_corners" && ct != "asymmetric")
    return "Resize coordinate_transformation_mode '" + ct + "' is not supported";
  if (n.attr_i("antialias", 0) != 0) return "Resize with antialias is not supported";
  if (n.has_attr("axes")) return "Resize with axes is not supported";
  if (n.attr_s("keep_aspect_ratio_policy", "stretch") != "stretch") return "Resize keep_aspect_ratio_policy other than stretch is not supported";
  if (n.attr_i("exclude_outside", 0) != 0) return "Resize with exclude_outside is not supported";
  const ValueInfo* x = g.value(n.inputs[0]);
  if (x && x->has_shape && x->shape.size() < 2) return "Resize of a tensor of rank below 2 is not supported";
  if (n.since_version >= 11 && n.has_input(1)) {
    const Tensor* roi = g.constant(n.inputs[1]);
    if (!roi) return "Resize's roi is not a constant";  // only tf_crop_and_resize reads it, refused above
  }
  return "";
}

std::unique_ptr<Op> create_resize(const Node& n, const Graph&) { return std::make_unique<ResizeImpl>(n, false); }

}  // namespace

// Scales (float32: their bit patterns, see ShapeValues) and sizes decide the output shape (Resize and
// NhwcResize alike).
std::vector<size_t> resize_shape_inputs(const Node& n) {
  if (n.since_version < 11) return {1};
  return {2, 3};
}

std::unique_ptr<Op> create_nhwc_resize(const Node& n, const Graph&) { return std::make_unique<ResizeImpl>(n, true); }

std::vector<OpDef> resize_op_defs() { return {{"Resize", 10, 22, check_resize, create_resize, resize_shape_inputs}}; }

}  // namespace optim
