// ReduceMean / ReduceSum / ReduceMax / ReduceMin / ReduceL1 / ReduceL2 / ReduceSumSquare on float32 over any set of axes (attribute in early
// opsets, a run-time int64 input in later ones), keepdims and noop_with_empty_axes as ONNX defines.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op.h"

namespace optim {
namespace {

enum class ReduceKind { kMean, kSum, kMax, kMin, kL1, kL2, kSumSquare };

// The opset from which each reduction takes its axes as input 1 instead of an attribute.
int axes_input_since(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

// Input 1 (the axes, where they are an input) decides the output shape.
std::vector<size_t> axes_input(const Node& n) {
  if (n.since_version >= axes_input_since(n.op)) return {1};
  return {};
}

class ReduceImpl : public Op {
 public:
  ReduceImpl(ReduceKind kind, std::vector<int64_t> attr_axes, bool axes_from_input, bool keepdims, bool noop_empty)
      : kind_(kind), attr_axes_(std::move(attr_axes)), axes_from_input_(axes_from_input), keepdims_(keepdims),
        noop_empty_(noop_empty) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return infer(in, {}); }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const Shape& x = *in[0];
    const std::vector<bool> mask = reduced_mask(x, axes(values));
    Shape out;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!mask[i]) out.push_back(x[i]);
      else if (keepdims_) out.push_back(1);
    }
    return {out};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    std::vector<int64_t> axes_in;
    if (axes_from_input_ && in.size() > 1 && in[1].present())
      axes_in.assign(in[1].as<int64_t>(), in[1].as<int64_t>() + in[1].numel());
    ShapeValues values{nullptr, axes_from_input_ && in.size() > 1 && in[1].present() ? &axes_in : nullptr};
    const std::vector<bool> mask = reduced_mask(xs, axes(values));
    const size_t r = xs.size();
    std::vector<int64_t> stride(r, 1);
    for (size_t i = r; i-- > 1;) stride[i - 1] = stride[i] * xs[i];
    // Offsets (relative to an output's base) of the elements each output reduces, and the kept dims.
    std::vector<int64_t> offsets{0};
    std::vector<int64_t> kept_dims, kept_strides;
    for (size_t d = 0; d < r; ++d) {
      if (mask[d]) {
        std::vector<int64_t> next;
        next.reserve(offsets.size() * static_cast<size_t>(xs[d]));
        for (int64_t o : offsets)
          for (int64_t j = 0; j < xs[d]; ++j) next.push_back(o + j * stride[d]);
        offsets.swap(next);
      } else {
        kept_dims.push_back(xs[d]);
        kept_strides.push_back(stride[d]);
      }
    }
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    const int64_t n_out = out[0].numel();
    const int64_t count = static_cast<int64_t>(offsets.size());
    const int64_t tasks = n_out * count > (1 << 15) ? std::min<int64_t>(n_out, 64) : 1;
    rc.parallel_for(static_cast<size_t>(std::max<int64_t>(tasks, 1)), [&](size_t t) {
      const int64_t per = (n_out + tasks - 1) / std::max<int64_t>(tasks, 1);
      const int64_t o0 = static_cast<int64_t>(t) * per, o1 = std::min(n_out, o0 + per);
      for (int64_t o = o0; o < o1; ++o) {
        int64_t rem = o, base = 0;
        for (size_t k = kept_dims.size(); k-- > 0;) {
          base += (rem % kept_dims[k]) * kept_strides[k];
          rem /= kept_dims[k];
        }
        y[o] = reduce_one(x + base, offsets);
      }
    });
  }

 private:
  std::vector<int64_t> axes(const ShapeValues& values) const {
    if (axes_from_input_) {
      if (values.size() > 1 && values[1]) return *values[1];
      return {};
    }
    return attr_axes_;
  }

  // True for each dim of x that is reduced.
  std::vector<bool> reduced_mask(const Shape& x, const std::vector<int64_t>& axes) const {
    const int64_t r = static_cast<int64_t>(x.size());
    std::vector<bool> mask(x.size(), axes.empty() && !noop_empty_);
    for (int64_t a : axes) {
      const int64_t ax = normalize_axis(a, r, "reduction axis");
      if (mask[static_cast<size_t>(ax)]) throw Error("reduction axis " + std::to_string(a) + " repeats");
      mask[static_cast<size_t>(ax)] = true;
    }
    return mask;
  }

  float reduce_one(const float* x, const std::vector<int64_t>& offsets) const {
    switch (kind_) {
      case ReduceKind::kMean:
      case ReduceKind::kSum: {
        double s = 0;  // double keeps long reductions accurate
        for (int64_t off : offsets) s += x[off];
        if (kind_ == ReduceKind::kSum) return static_cast<float>(s);
        return offsets.empty() ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(s / static_cast<double>(offsets.size()));
      }
      case ReduceKind::kL1:
      case ReduceKind::kL2:
      case ReduceKind::kSumSquare: {
        double s = 0;
        for (int64_t off : offsets) {
          const double v = x[off];
          s += kind_ == ReduceKind::kL1 ? std::fabs(v) : v * v;
        }
        return static_cast<float>(kind_ == ReduceKind::kL2 ? std::sqrt(s) : s);
      }
      case ReduceKind::kMax: {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t off : offsets) m = (x[off] > m || std::isnan(x[off])) ? x[off] : m;
        return m;
      }
      case ReduceKind::kMin: {
        float m = std::numeric_limits<float>::infinity();
        for (int64_t off : offsets) m = (x[off] < m || std::isnan(x[off])) ? x[off] : m;
        return m;
      }
    }
    return 0.f;
  }

  ReduceKind kind_;
  std::vector<int64_t> attr_axes_;
  bool axes_from_input_, keepdims_, noop_empty_;
};

ReduceKind reduce_kind(const std::string& op) {
  if (op == "ReduceMean") return ReduceKind::kMean;
  if (op == "ReduceSum") return ReduceKind::kSum;
  if (op == "ReduceMax") return ReduceKind::kMax;
  if (op == "ReduceL1") return ReduceKind::kL1;
  if (op == "ReduceL2") return ReduceKind::kL2;
  if (op == "ReduceSumSquare") return ReduceKind::kSumSquare;
  return ReduceKind::kMin;
}

std::string check_reduce(const Node& n, const Graph& g) {
  if (n.since_version >= axes_input_since(n.op) && n.has_input(1)) {
    const ValueInfo* v = g.value(n.inputs[1]);
    if (v && v->dtype != DType::kInt64) return n.op + " axes '" + n.inputs[1] + "' are not int64";
  }
  return require_float(g, n, 0);
}

std::unique_ptr<Op> create_reduce(const Node& n, const Graph&) {
  const bool from_input = n.since_version >= axes_input_since(n.op);
  return std::make_unique<ReduceImpl>(reduce_kind(n.op), from_input ? std::vector<int64_t>{} : n.attr_ints("axes"),
                                      from_input, n.attr_i("keepdims", 1) != 0,
                                      n.attr_i("noop_with_empty_axes", 0) != 0);
}

}  // namespace

std::vector<OpDef> reduce_op_defs() {
  return {
      {"ReduceMean", 1, 18, check_reduce, create_reduce, axes_input},
      {"ReduceSum", 1, 13, check_reduce, create_reduce, axes_input},
      {"ReduceMax", 1, 20, check_reduce, create_reduce, axes_input},  // 20 only adds bool
      {"ReduceMin", 1, 20, check_reduce, create_reduce, axes_input},
      {"ReduceL1", 1, 18, check_reduce, create_reduce, axes_input},
      {"ReduceL2", 1, 18, check_reduce, create_reduce, axes_input},
      {"ReduceSumSquare", 1, 18, check_reduce, create_reduce, axes_input},
  };
}

}  // namespace optim
