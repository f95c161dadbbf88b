// Data-movement ops: Reshape, Flatten, Identity, Squeeze, Unsqueeze (copies of any fixed-size element
// type), Transpose (float32).
#include <algorithm>
#include <cstring>

#include "op.h"
#include "transpose_blocks.h"

namespace optim {
namespace {

// Ops whose output is the input's bytes under a new shape. The shape may depend on the int64 values
// of one more input (Reshape's target, Squeeze/Unsqueeze axes from opset 13), read at run time.
class CopyReshape : public Op {
 public:
  // values: the contents of input `value_input`, or nullptr when there is none (or it is omitted).
  using ShapeFn = std::function<Shape(const Shape& in, const std::vector<int64_t>* values)>;
  explicit CopyReshape(ShapeFn fn, int value_input = -1) : fn_(std::move(fn)), value_input_(value_input) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {fn_(*in[0], nullptr)}; }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const std::vector<int64_t>* v = nullptr;
    if (value_input_ >= 0 && static_cast<size_t>(value_input_) < values.size()) v = values[static_cast<size_t>(value_input_)];
    if (value_input_ >= 0 && static_cast<size_t>(value_input_) < in.size() && in[static_cast<size_t>(value_input_)] && !v)
      throw Error("the values of input " + std::to_string(value_input_) + " are not available");
    return {fn_(*in[0], v)};
  }
  bool output_aliases_input() const override { return true; }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const size_t bytes = static_cast<size_t>(in[0].numel()) * dtype_size(in[0].dtype);
    if (!bytes || out[0].data == in[0].data) return;
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    parallel_chunks(rc, static_cast<int64_t>(bytes), [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, static_cast<size_t>(e - b)); });
  }

 private:
  ShapeFn fn_;
  int value_input_;
};

Shape reshape_to(const Shape& in, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.begin(), target.end());
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size()) throw Error("shape " + shape_str(target) + " copies dim " + std::to_string(i) + " that input " + shape_str(in) + " lacks");
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer_at >= 0) throw Error("shape " + shape_str(target) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw Error("shape " + shape_str(target) + " has a negative dimension");
    } else {
      known *= out[i];
    }
  }
  const int64_t total = shape_numel(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      throw Error("cannot reshape " + shape_str(in) + " to " + shape_str(target));
    out[static_cast<size_t>(infer_at)] = total / known;
  }
  if (shape_numel(out) != total) throw Error("cannot reshape " + shape_str(in) + " (" + std::to_string(total) + " elements) to " + shape_str(target));
  return out;
}

class TransposeImpl : public Op {
 public:
  explicit TransposeImpl(std::vector<int64_t> perm) : perm_(std::move(perm)) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    const std::vector<int64_t> p = perm_for(x.size());
    Shape out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[static_cast<size_t>(p[i])];
    return {out};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const size_t r = xs.size();
    const std::vector<int64_t> p = perm_for(r);
    std::vector<int64_t> xstride(r, 1);
    for (size_t i = r; i-- > 1;) xstride[i - 1] = xstride[i] * xs[i];
    // Stride in X of each output dim; the last output dim is the inner loop.
    std::vector<int64_t> st(r);
    for (size_t i = 0; i < r; ++i) st[i] = xstride[static_cast<size_t>(p[i])];
    // perm = [0..k-1, j..r-1, k..j-1]: per batch of the first k dims, a rows x cols matrix transposed.
    int64_t batches = 1, rows = 1, cols = 1;
    if (swaps_two_groups(p, xs, &batches, &rows, &cols)) {
      transpose_batched(rc, in[0].data, out[0].data, batches, rows, cols, dtype_size(in[0].dtype));
      return;
    }
    switch (dtype_size(in[0].dtype)) {  // moves elements of any fixed size
      case 1: return move<uint8_t>(rc, in[0], out[0], st);
      case 2: return move<uint16_t>(rc, in[0], out[0], st);
      case 4: return move<uint32_t>(rc, in[0], out[0], st);
      case 8: return move<uint64_t>(rc, in[0], out[0], st);
      default: throw Error(std::string("cannot transpose elements of type ") + dtype_name(in[0].dtype));
    }
  }

 private:
  // Output row by output row; `st`: the stride in X of each output dim.
  template <typename T>
  static void move(const RunContext& rc, const TensorRef& in, const TensorOut& out, const std::vector<int64_t>& st) {
    const size_t r = st.size();
    const Shape& ys = *out.shape;
    const T* x = in.as<T>();
    T* y = out.as<T>();
    if (r == 0) {  // a scalar
      y[0] = x[0];
      return;
    }
    const int64_t inner = ys[r - 1];
    const int64_t inner_stride = st[r - 1];
    const int64_t rows = inner ? out.numel() / inner : 0;
    rc.parallel_for(rows > 4096 ? 16 : 1, [&](size_t t) {
      const int64_t per = (rows + (rows > 4096 ? 16 : 1) - 1) / (rows > 4096 ? 16 : 1);
      const int64_t b = static_cast<int64_t>(t) * per, e = std::min(rows, b + per);
      for (int64_t row = b; row < e; ++row) {
        int64_t rem = row, off = 0;
        for (size_t i = r - 1; i-- > 0;) {
          off += (rem % ys[i]) * st[i];
          rem /= ys[i];
        }
        T* yr = y + row * inner;
        if (inner_stride == 1) {  // the last dim stays last (attention heads, [0, 2, 1, 3]): whole rows
          std::memcpy(yr, x + off, static_cast<size_t>(inner) * sizeof(T));
          continue;
        }
        for (int64_t j = 0; j < inner; ++j) yr[j] = x[off + j * inner_stride];
      }
    });
  }

  // Whether perm keeps a prefix of dims and swaps the two groups after it; their sizes if so.
  static bool swaps_two_groups(const std::vector<int64_t>& p, const Shape& x, int64_t* batches, int64_t* rows, int64_t* cols) {
    const size_t r = p.size();
    size_t k = 0;
    while (k < r && p[k] == static_cast<int64_t>(k)) ++k;
    if (k + 2 > r) return false;
    const int64_t j = p[k];  // the output's next dim comes from input dim j: group [j, r) moved before [k, j)
    for (size_t i = k; i < r; ++i) {
      const int64_t want = i - k < r - static_cast<size_t>(j) ? j + static_cast<int64_t>(i - k)
                                                              : static_cast<int64_t>(k + (i - k) - (r - static_cast<size_t>(j)));
      if (p[i] != want) return false;
    }
    *batches = *rows = *cols = 1;
    for (size_t i = 0; i < k; ++i) *batches *= x[i];
    for (size_t i = k; i < static_cast<size_t>(j); ++i) *rows *= x[i];
    for (size_t i = static_cast<size_t>(j); i < r; ++i) *cols *= x[i];
    return true;
  }

  std::vector<int64_t> perm_for(size_t rank) const {
    std::vector<int64_t> p = perm_;
    if (p.empty()) {  // default: reverse the dims
      p.resize(rank);
      for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(rank - 1 - i);
    }
    if (p.size() != rank) throw Error("perm has " + std::to_string(p.size()) + " entries for rank " + std::to_string(rank));
    std::vector<bool> seen(rank, false);
    for (int64_t v : p) {
      if (v < 0 || v >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(v)]) throw Error("perm is not a permutation of the dims");
      seen[static_cast<size_t>(v)] = true;
    }
    return p;
  }
  std::vector<int64_t> perm_;
};

// "" when input `index` (a shape or axes tensor) is int64, else the reason.
std::string require_int64(const Graph& g, const Node& n, size_t index, const char* what) {
  if (!n.has_input(index)) return "";
  const ValueInfo* v = g.value(n.inputs[index]);
  if (!v || v->dtype == DType::kInt64) return "";
  return n.op + " " + what + " '" + n.inputs[index] + "' is " + dtype_name(v->dtype) + ", not int64";
}

// Data movement is type-blind: any fixed-size element type. (An int64 output that another op reads
// as a shape is kept out of the partition by the partitioner, see OpDef::shape_inputs.)
std::string check_moved_data(const Node& n, const Graph& g) { return require_fixed_size(g, n, 0); }

// Input 1 is a shape value: Reshape's target, Squeeze/Unsqueeze axes from opset 13.
std::vector<size_t> second_input_is_shape(const Node& n) {
  if ((n.op == "Squeeze" || n.op == "Unsqueeze") && n.since_version < 13) return {};
  return {1};
}

std::string check_reshape(const Node& n, const Graph& g) {
  const std::string why = require_int64(g, n, 1, "shape");
  return why.empty() ? check_moved_data(n, g) : why;
}

std::string check_squeeze(const Node& n, const Graph& g) {
  const std::string why = n.since_version >= 13 ? require_int64(g, n, 1, "axes") : "";
  return why.empty() ? check_moved_data(n, g) : why;
}

// Axes from the attribute (before opset 13) or from the run-time values of input 1.
const std::vector<int64_t>& pick_axes(const std::vector<int64_t>& attr, const std::vector<int64_t>* values) {
  return values ? *values : attr;
}

std::unique_ptr<Op> create_reshape(const Node& n, const Graph&) {
  const bool allowzero = n.attr_i("allowzero", 0) != 0;
  return std::make_unique<CopyReshape>(
      [allowzero](const Shape& in, const std::vector<int64_t>* target) {
        if (!target) throw Error("Reshape has no target shape");
        return reshape_to(in, *target, allowzero);
      },
      1);
}

std::unique_ptr<Op> create_flatten(const Node& n, const Graph&) {
  const int64_t axis_attr = n.attr_i("axis", 1);
  return std::make_unique<CopyReshape>([axis_attr](const Shape& in, const std::vector<int64_t>*) {
    const int64_t r = static_cast<int64_t>(in.size());
    const int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
    if (axis < 0 || axis > r) throw Error("Flatten axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(r));
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= in[static_cast<size_t>(i)];
    return Shape{a, b};
  });
}

std::unique_ptr<Op> create_identity(const Node&, const Graph&) {
  return std::make_unique<CopyReshape>([](const Shape& in, const std::vector<int64_t>*) { return in; });
}

std::unique_ptr<Op> create_squeeze(const Node& n, const Graph&) {
  const std::vector<int64_t> attr = n.since_version < 13 ? n.attr_ints("axes") : std::vector<int64_t>{};
  auto fn = [attr](const Shape& in, const std::vector<int64_t>* values) {
    const std::vector<int64_t>& axes = pick_axes(attr, values);
    const int64_t r = static_cast<int64_t>(in.size());
    std::vector<bool> drop(in.size(), false);
    if (axes.empty()) {
      for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
    }
    for (int64_t a : axes) {
      const int64_t ax = normalize_axis(a, r, "Squeeze axis");
      if (in[static_cast<size_t>(ax)] != 1) throw Error("Squeeze axis " + std::to_string(a) + " of " + shape_str(in) + " is not 1");
      drop[static_cast<size_t>(ax)] = true;
    }
    Shape out;
    for (size_t i = 0; i < in.size(); ++i)
      if (!drop[i]) out.push_back(in[i]);
    return out;
  };
  return std::make_unique<CopyReshape>(fn, n.since_version < 13 ? -1 : 1);
}

std::unique_ptr<Op> create_unsqueeze(const Node& n, const Graph&) {
  const std::vector<int64_t> attr = n.since_version < 13 ? n.attr_ints("axes") : std::vector<int64_t>{};
  auto fn = [attr](const Shape& in, const std::vector<int64_t>* values) {
    const std::vector<int64_t>& axes = pick_axes(attr, values);
    if (axes.empty()) throw Error("Unsqueeze needs at least one axis");
    const int64_t r = static_cast<int64_t>(in.size() + axes.size());
    std::vector<bool> ins(static_cast<size_t>(r), false);
    for (int64_t a : axes) {
      const int64_t ax = normalize_axis(a, r, "Unsqueeze axis");
      if (ins[static_cast<size_t>(ax)]) throw Error("Unsqueeze axes repeat " + std::to_string(a));
      ins[static_cast<size_t>(ax)] = true;
    }
    Shape out;
    size_t j = 0;
    for (int64_t i = 0; i < r; ++i) out.push_back(ins[static_cast<size_t>(i)] ? 1 : in[j++]);
    return out;
  };
  return std::make_unique<CopyReshape>(fn, n.since_version < 13 ? -1 : 1);
}

std::unique_ptr<Op> create_transpose(const Node& n, const Graph&) {
  return std::make_unique<TransposeImpl>(n.attr_ints("perm"));
}

}  // namespace

std::vector<OpDef> shape_op_defs() {
  return {
      // Versions after 13 only add element types; the float32 semantics are unchanged.
      {"Reshape", 5, 25, check_reshape, create_reshape, second_input_is_shape},
      {"Flatten", 1, 25, check_moved_data, create_flatten},
      {"Identity", 1, 25, check_moved_data, create_identity},
      {"Squeeze", 1, 25, check_squeeze, create_squeeze, second_input_is_shape},
      {"Unsqueeze", 1, 25, check_squeeze, create_unsqueeze, second_input_is_shape},
      {"Transpose", 1, 25, check_moved_data, create_transpose},
  };
}

}  // namespace optim
