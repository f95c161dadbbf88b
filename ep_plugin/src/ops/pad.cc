// Pad (opsets 2-25): modes constant, reflect, edge and wrap (opset 19); pads as an attribute (before opset 11)
// or an int64 input that decides the shape, an optional constant_value input, an optional axes input
// (opset 18). Negative pads crop first, then the rest is padded, as ONNX Runtime does. Any fixed-size element
// type (float32 only before opset 11, where the value is a float attribute).
#include <algorithm>
#include <cstring>

#include "index_inputs.h"
#include "strided_copy.h"

namespace optim {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// One axis: crop `lo` elements at the start (negative begin pad), keep `len`, then pad `before` / `after`.
struct PadAxis {
  int64_t lo = 0, len = 0, before = 0, after = 0;
  int64_t out() const { return before + len + after; }
};

std::vector<PadAxis> resolve(const Shape& in, const std::vector<int64_t>& pads, const std::vector<int64_t>* axes_in, PadMode mode) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (axes_in) {
    axes = *axes_in;
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    throw Error("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes of input " +
                shape_str(in));
  std::vector<int64_t> begin(in.size(), 0), end(in.size(), 0);
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(normalize_axis(axes[i], rank, "Pad axis"));
    if (seen[a]) throw Error("Pad axes repeat axis " + std::to_string(axes[i]));
    seen[a] = true;
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  std::vector<PadAxis> out(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    PadAxis& p = out[d];
    const std::string pads_d = "pads " + std::to_string(begin[d]) + ", " + std::to_string(end[d]);
    if (begin[d] < -in[d] || end[d] < -in[d])  // (also keeps -begin and -end from overflowing)
      throw Error(pads_d + " crop more than dim " + std::to_string(d) + " of input " + shape_str(in) + " holds");
    p.lo = std::max<int64_t>(0, -begin[d]);
    p.len = in[d] - p.lo - std::max<int64_t>(0, -end[d]);
    p.before = std::max<int64_t>(0, begin[d]);
    p.after = std::max<int64_t>(0, end[d]);
    int64_t total;
    if (p.len < 0 || __builtin_add_overflow(p.before, p.after, &total) || __builtin_add_overflow(total, p.len, &total))
      throw Error(pads_d + " do not give dim " + std::to_string(d) + " of input " + shape_str(in) + " a valid size");
    const std::string where =
        " (dim " + std::to_string(d) + " of input " + shape_str(in) + " after cropping: " + std::to_string(p.len) + ")";
    // As ONNX Runtime: the modes that read the input need every dimension non-empty, padded or not.
    if (mode != PadMode::kConstant && p.len == 0) throw Error("reflect, edge and wrap padding need a non-empty input" + where);
    if (p.before == 0 && p.after == 0) continue;
    if (mode == PadMode::kReflect && (p.len < 2 || p.before > p.len - 1 || p.after > p.len - 1))
      throw Error("reflect pads " + std::to_string(p.before) + ", " + std::to_string(p.after) +
                  " need a dimension longer than either" + where);
  }
  return out;
}

// Where output index o of an axis reads from in the input (-1: the constant).
int64_t source(const PadAxis& p, PadMode mode, int64_t o) {
  int64_t k = o - p.before;
  if (k < 0 || k >= p.len) {
    switch (mode) {
      case PadMode::kConstant: return -1;
      case PadMode::kEdge: k = std::clamp<int64_t>(k, 0, p.len - 1); break;
      case PadMode::kReflect: k = k < 0 ? -k : 2 * (p.len - 1) - k; break;
      case PadMode::kWrap: k = ((k % p.len) + p.len) % p.len; break;
    }
  }
  return p.lo + k;
}

class PadImpl : public Op {
 public:
  PadImpl(PadMode mode, std::vector<int64_t> attr_pads, float attr_value, bool from_inputs)
      : mode_(mode), attr_pads_(std::move(attr_pads)), attr_value_(attr_value), from_inputs_(from_inputs) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (from_inputs_) throw Error("Pad needs the values of its pads input");
    return {out_shape(resolve(*in[0], attr_pads_, nullptr, mode_))};
  }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    if (!from_inputs_) return infer(in);
    const auto* pads = index_values(in, values, 1, "pads");
    if (!pads) throw Error("Pad needs pads");
    return {out_shape(resolve(*in[0], *pads, index_values(in, values, 3, "axes"), mode_))};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    if (out[0].numel() == 0) return;
    std::vector<PadAxis> axes;
    if (from_inputs_) {
      std::vector<int64_t> axes_v;
      const bool has_axes = in.size() > 3 && in[3].present();
      if (has_axes) axes_v = int_values(in[3]);
      axes = resolve(*in[0].shape, int_values(in[1]), has_axes ? &axes_v : nullptr, mode_);
    } else {
      axes = resolve(*in[0].shape, attr_pads_, nullptr, mode_);
    }
    uint64_t value = 0;  // the constant's bytes (zero: 0 of every type)
    const size_t elem = dtype_size(in[0].dtype);
    if (!from_inputs_) {
      std::memcpy(&value, &attr_value_, sizeof(float));
    } else if (in.size() > 2 && in[2].present() && in[2].numel() > 0) {
      std::memcpy(&value, in[2].data, elem);
    }
    switch (elem) {
      case 1: return fill<uint8_t>(rc, in[0], out[0], axes, value);
      case 2: return fill<uint16_t>(rc, in[0], out[0], axes, value);
      case 4: return fill<uint32_t>(rc, in[0], out[0], axes, value);
      default: return fill<uint64_t>(rc, in[0], out[0], axes, value);
    }
  }

 private:
  static Shape out_shape(const std::vector<PadAxis>& axes) {
    Shape s;
    for (const PadAxis& p : axes) s.push_back(p.out());
    return s;
  }

  // Output row by row (the last dim): a row whose outer indexes fall in constant padding is the value; any
  // other reads one input row, its middle copied whole and its padded ends element by element.
  template <typename T>
  void fill(const RunContext& rc, const TensorRef& x_ref, const TensorOut& y_ref, const std::vector<PadAxis>& axes,
            uint64_t value_bytes) const {
    T value;
    std::memcpy(&value, &value_bytes, sizeof(T));
    const T* x = x_ref.as<T>();
    T* y = y_ref.as<T>();
    const size_t r = axes.size();
    if (r == 0) {
      y[0] = x[0];
      return;
    }
    const std::vector<int64_t> xst = row_major_strides(*x_ref.shape);
    std::vector<std::vector<int64_t>> src(r);  // per axis and output index: the input index (-1: constant)
    for (size_t d = 0; d < r; ++d)
      for (int64_t o = 0; o < axes[d].out(); ++o) src[d].push_back(source(axes[d], mode_, o));
    const PadAxis& last = axes[r - 1];
    const int64_t inner = last.out();
    const int64_t rows = y_ref.numel() / inner;
    auto body = [&](int64_t row0, int64_t row1) {
      for (int64_t row = row0; row < row1; ++row) {
        T* yr = y + row * inner;
        int64_t rem = row, off = 0;
        bool constant = false;
        for (size_t d = r - 1; d-- > 0;) {
          const int64_t s = src[d][static_cast<size_t>(rem % axes[d].out())];
          rem /= axes[d].out();
          constant = constant || s < 0;
          off += s * xst[d];
        }
        if (constant) {
          std::fill(yr, yr + inner, value);
          continue;
        }
        const T* xr = x + off;
        const std::vector<int64_t>& cols = src[r - 1];
        auto edge = [&](int64_t j) { yr[j] = mode_ == PadMode::kConstant ? value : xr[cols[static_cast<size_t>(j)]]; };
        for (int64_t j = 0; j < last.before; ++j) edge(j);
        if (last.len) std::memcpy(yr + last.before, xr + last.lo, static_cast<size_t>(last.len) * sizeof(T));
        for (int64_t j = last.before + last.len; j < inner; ++j) edge(j);
      }
    };
    parallel_rows(rc, rows, inner, body);
  }

  PadMode mode_;
  std::vector<int64_t> attr_pads_;
  float attr_value_;
  bool from_inputs_;
};

bool parse_mode(const Node& n, PadMode* mode) {
  const std::string m = n.attr_s("mode", "constant");
  if (m == "constant") *mode = PadMode::kConstant;
  else if (m == "reflect") *mode = PadMode::kReflect;
  else if (m == "edge") *mode = PadMode::kEdge;
  else if (m == "wrap" && n.since_version >= 19) *mode = PadMode::kWrap;
  else return false;
  return true;
}

std::string check_pad(const Node& n, const Graph& g) {
  PadMode mode;
  if (!parse_mode(n, &mode)) return "Pad mode '" + n.attr_s("mode", "constant") + "' is not supported";
  if (n.since_version < 11) {
    if (!n.has_attr("pads")) return "Pad without a pads attribute";
    return require_float(g, n, 0);
  }
  std::string r = require_index_input(g, n, 1, "pads");
  if (r.empty()) r = require_index_input(g, n, 3, "axes");
  return r.empty() ? require_fixed_size(g, n, 0) : r;
}

std::unique_ptr<Op> create_pad(const Node& n, const Graph&) {
  PadMode mode = PadMode::kConstant;
  if (!parse_mode(n, &mode)) throw Error("Pad mode '" + n.attr_s("mode", "constant") + "' is not supported");
  if (n.since_version < 11) return std::make_unique<PadImpl>(mode, n.attr_ints("pads"), n.attr_f("value", 0.f), false);
  return std::make_unique<PadImpl>(mode, std::vector<int64_t>{}, 0.f, true);
}

// pads (input 1) and axes (input 3) decide the output shape; constant_value (input 2) is data.
std::vector<size_t> pad_shape_inputs(const Node& n) {
  if (n.since_version < 11) return {};
  return {1, 3};
}

}  // namespace

std::vector<OpDef> pad_op_defs() {
  // Versions after 21 add element types only (4-bit and 8-bit floats, 2-bit integers), which the check refuses.
  return {{"Pad", 2, 25, check_pad, create_pad, pad_shape_inputs}};
}

}  // namespace optim
