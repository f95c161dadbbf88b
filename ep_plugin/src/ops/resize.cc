// Resize (opset 10-22): nearest (every nearest_mode) on float32, uint8 and int8 (it only picks values, so
// quantized_data_movement runs it on a QDQ model's bytes), linear on float32; on the last two dims (the
// others must keep their size: batch and channels), with the coordinate transformations half_pixel,
// pytorch_half_pixel, align_corners and asymmetric; output size from scales or sizes (read before the
// run, see OpDef::shape_inputs). NhwcResize is the same op on channels-last tensors (the layout rewrite
// moves it; its scales / sizes still name ONNX's NCHW dims): there each output pixel mixes whole pixels
// of contiguous channels. QResize / NhwcQResize (quantized_data_movement) are linear on uint8/int8 between
// a DequantizeLinear and a QuantizeLinear, computing exactly the float ops between the pair.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "op.h"

namespace optim {
namespace {

enum class Mode { kNearest, kLinear };
enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
// kSimple: Resize-10, which has no nearest_mode; ONNX Runtime keeps its old rule there (truncate, ceil when
// the dim shrinks).
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

// Per output position along one dim: the two source positions and their weights, as ONNX Runtime computes
// them (w0 = |v - i1|'s complement written as |v - i1 - 1|, both 0.5 where the two coincide), so that a
// quantized linear Resize rounds exactly as its float Resize between the Q/DQ pair does (nearest: i0 only).
struct Taps1D {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

// The quantization around a QResize (the rewrite's DequantizeLinear and QuantizeLinear parameters).
struct Quantization {
  bool on = false;
  float x_scale = 1.f, y_scale = 1.f;
  int32_t x_zero = 0, y_zero = 0;
};

class ResizeImpl : public Op {
 public:
  ResizeImpl(const Node& n, bool channels_last, Quantization q = {}) : channels_last_(channels_last), q_(q) {
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
    if (opset10_) nearest_ = Nearest::kSimple;
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
    if (shape_numel(nchw_in) == 0) throw Error("an empty input has no values to resize into a non-empty output");
    // The scales the output size came from: given ones, or out / in per dim (ONNX's rule with sizes).
    std::vector<float> scales(nchw_in.size(), 1.f);
    const TensorRef& sc = in.size() > (opset10_ ? 1u : 2u) ? in[opset10_ ? 1 : 2] : TensorRef{};
    const bool have_scales = sc.present() && sc.numel() > 0;
    for (size_t d = 0; d < nchw_in.size(); ++d)
      scales[d] = have_scales ? sc.as<float>()[d] : static_cast<float>(nchw_out[d]) / static_cast<float>(nchw_in[d]);
    const size_t r = nchw_in.size();
    const int64_t ih = nchw_in[r - 2], iw = nchw_in[r - 1], oh = nchw_out[r - 2], ow = nchw_out[r - 1];
    const Taps1D ty = taps(ih, oh, scales[r - 2]), tx = taps(iw, ow, scales[r - 1]);
    int64_t outer = 1;
    for (size_t d = 0; d + 2 < r; ++d) outer *= nchw_in[d];
    if (mode_ == Mode::kNearest) {
      // A copy, not a blend with zero weights: 0 * inf would turn a neighbour's infinity into NaN.
      const int64_t c = channels_last_ ? nchw_in[1] : 1, planes = channels_last_ ? outer / std::max<int64_t>(c, 1) : outer;
      const size_t esize = dtype_size(in[0].dtype);
      if (esize == 1) return pick_nearest<uint8_t>(rc, in[0].data, out[0].data, ty, tx, planes, ih, iw, oh, ow, c);
      if (esize == 4) return pick_nearest<uint32_t>(rc, in[0].data, out[0].data, ty, tx, planes, ih, iw, oh, ow, c);
      throw Error(std::string("Resize nearest on ") + dtype_name(in[0].dtype) + " is not implemented");
    }
    // Linear (float32, or the bytes of a QResize). An output of the input's shape is the input, as ONNX
    // Runtime copies it then (requantized for a QResize).
    const int64_t c = channels_last_ ? nchw_in[1] : 1, planes = channels_last_ ? outer / std::max<int64_t>(c, 1) : outer;
    const bool copy = nchw_in == nchw_out;
    if (!q_.on && in[0].dtype == DType::kFloat32) {
      if (copy) return parallel_chunks(rc, in[0].numel(), [&](int64_t b, int64_t e) {
        std::memcpy(out[0].as<float>() + b, in[0].as<float>() + b, sizeof(float) * static_cast<size_t>(e - b));
      });
      return blend_rows(rc, in[0].as<float>(), out[0], ty, tx, planes, ih, iw, oh, ow, c, false);
    }
    if (q_.on && in[0].dtype == DType::kUint8) return blend_rows(rc, in[0].as<uint8_t>(), out[0], ty, tx, planes, ih, iw, oh, ow, c, copy);
    if (q_.on && in[0].dtype == DType::kInt8) return blend_rows(rc, in[0].as<int8_t>(), out[0], ty, tx, planes, ih, iw, oh, ow, c, copy);
    throw Error(std::string("Resize linear on ") + dtype_name(in[0].dtype) + " is not implemented" +
                (q_.on ? " (QResize reads uint8 or int8)" : " (float32 only)"));
  }

 private:
  // A source element as the float the blend reads: a QResize's bytes dequantized as DequantizeLinear does.
  template <typename T>
  float load(T v) const {
    if constexpr (std::is_same_v<T, float>) return v;
    else return static_cast<float>(static_cast<int32_t>(v) - q_.x_zero) * q_.x_scale;
  }

  // Linear rows: each output row (ow pixels of c channels) blended in float32, then stored, or quantized as
  // QuantizeLinear does (the kernel table's quantize) for a QResize; `copy`: the row is its source row.
  template <typename T>
  void blend_rows(const RunContext& rc, const T* x, const TensorOut& y, const Taps1D& ty, const Taps1D& tx, int64_t planes,
                  int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t c, bool copy) const {
    const int64_t row_len = ow * c;
    parallel_rows(rc, planes * oh, row_len, [&](int64_t b, int64_t e) {
      std::vector<float> buf(q_.on ? static_cast<size_t>(row_len) : 0);
      for (int64_t row = b; row < e; ++row) {
        const int64_t plane = row / oh, oy = row % oh;
        const T* src = x + plane * ih * iw * c;
        float* dst = q_.on ? buf.data() : y.as<float>() + row * row_len;
        if (copy) {
          for (int64_t j = 0; j < row_len; ++j) dst[j] = load(src[oy * row_len + j]);
        } else {
          for (int64_t ox = 0; ox < ow; ++ox) blend_pixel(src, ty, tx, oy, ox, iw, c, dst + ox * c);
        }
        if (q_.on)
          rc.kernels.quantize(buf.data(), q_.y_scale, q_.y_zero, y.dtype == DType::kUint8, y.as<uint8_t>() + row * row_len, row_len);
      }
    });
  }

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

  int64_t nearest_index(float v, int64_t in, float scale) const {
    float f;
    switch (nearest_) {
      case Nearest::kSimple: f = scale < 1.f ? std::ceil(v) : std::trunc(v); break;
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
    t.w0.assign(static_cast<size_t>(out), 1.f);
    t.w1.assign(static_cast<size_t>(out), 0.f);
    for (int64_t o = 0; o < out; ++o) {
      const float v = scale == 1.f ? static_cast<float>(o) : original(o, in, out, scale);  // as ONNX Runtime
      if (mode_ == Mode::kNearest) {
        t.i0[o] = t.i1[o] = nearest_index(v, in, scale);
        continue;
      }
      const float c = std::clamp(v, 0.f, static_cast<float>(in - 1));
      const int64_t lo = std::min<int64_t>(static_cast<int64_t>(c), in - 1), hi = std::min<int64_t>(lo + 1, in - 1);
      t.i0[o] = lo;
      t.i1[o] = hi;
      t.w1[o] = lo == hi ? 0.5f : std::fabs(c - static_cast<float>(lo));
      t.w0[o] = lo == hi ? 0.5f : std::fabs(c - static_cast<float>(hi));
    }
    return t;
  }

  // Nearest: each output pixel of `c` interleaved channels (1 for NCHW planes) is a copy of its source
  // pixel's, element type T of the element's size (the bytes move unchanged).
  template <typename T>
  static void pick_nearest(const RunContext& rc, const void* xv, void* yv, const Taps1D& ty, const Taps1D& tx,
                           int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t c) {
    const T* x = static_cast<const T*>(xv);
    T* y = static_cast<T*>(yv);
    parallel_rows(rc, planes * oh, ow * c, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t plane = row / oh, oy = row % oh;
        const T* src = x + (plane * ih + ty.i0[oy]) * iw * c;
        T* dst = y + row * ow * c;
        if (c == 1) {
          for (int64_t ox = 0; ox < ow; ++ox) dst[ox] = src[tx.i0[ox]];
        } else {
          for (int64_t ox = 0; ox < ow; ++ox) std::memcpy(dst + ox * c, src + tx.i0[ox] * c, sizeof(T) * c);
        }
      }
    });
  }

  // One output pixel of `c` interleaved channels (1 for NCHW planes): bilinear mix of four, in ONNX Runtime's
  // order of operations ((w0x * w0y) * x00 + (w1x * w0y) * x01 + ...; this file builds without FMA contraction).
  template <typename T>
  void blend_pixel(const T* src, const Taps1D& ty, const Taps1D& tx, int64_t oy, int64_t ox, int64_t iw, int64_t c,
                   float* __restrict dst) const {
    const float w00 = tx.w0[ox] * ty.w0[oy], w01 = tx.w1[ox] * ty.w0[oy], w10 = tx.w0[ox] * ty.w1[oy],
                w11 = tx.w1[ox] * ty.w1[oy];
    const T* a = src + (ty.i0[oy] * iw + tx.i0[ox]) * c;
    const T* b = src + (ty.i0[oy] * iw + tx.i1[ox]) * c;
    const T* p = src + (ty.i1[oy] * iw + tx.i0[ox]) * c;
    const T* q = src + (ty.i1[oy] * iw + tx.i1[ox]) * c;
    for (int64_t j = 0; j < c; ++j) dst[j] = w00 * load(a[j]) + w01 * load(b[j]) + w10 * load(p[j]) + w11 * load(q[j]);
  }

  Mode mode_;
  Coord coord_;
  Nearest nearest_;
  bool opset10_ = false;
  bool channels_last_;
  Quantization q_;
};

std::string check_resize(const Node& n, const Graph& g) {
  const std::string mode = n.attr_s("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return "Resize mode '" + mode + "' is not supported (nearest and linear are)";
  const ValueInfo* data = g.value(n.inputs[0]);
  const bool bytes = data && (data->dtype == DType::kUint8 || data->dtype == DType::kInt8);
  if (!(bytes && mode == "nearest"))  // nearest picks values of any of these types; linear computes in float32
    if (std::string r = require_float(g, n, 0); !r.empty()) return r + (bytes ? " in linear mode; nearest runs uint8/int8" : "");
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

// QResize / NhwcQResize (quantized_data_movement): a linear Resize between a DequantizeLinear and a
// QuantizeLinear, on their bytes; the Q/DQ parameters are its attributes.
namespace {
Quantization quantization_of(const Node& n) {
  Quantization q;
  q.on = true;
  q.x_scale = n.attr_f("x_scale", 1.f);
  q.y_scale = n.attr_f("y_scale", 1.f);
  q.x_zero = static_cast<int32_t>(n.attr_i("x_zero_point", 0));
  q.y_zero = static_cast<int32_t>(n.attr_i("y_zero_point", 0));
  return q;
}
}  // namespace
std::unique_ptr<Op> create_qresize(const Node& n, const Graph&) { return std::make_unique<ResizeImpl>(n, false, quantization_of(n)); }
std::unique_ptr<Op> create_nhwc_qresize(const Node& n, const Graph&) { return std::make_unique<ResizeImpl>(n, true, quantization_of(n)); }

std::vector<OpDef> resize_op_defs() { return {{"Resize", 10, 22, check_resize, create_resize, resize_shape_inputs}}; }

}  // namespace optim
