// Ops whose output comes from shapes or scalars rather than element data: Shape (start/end from opset 15) and
// Size as int64, ConstantOfShape (its shape input decides the output; value of any fixed-size type), Range
// (int64, float32, int32 constants; start/limit/delta decide its length). Claimed where their output is data
// (position ids, masks); where it reaches a shape they stay with the CPU EP's shape computations
// (index_inputs.h, feeds_a_shape).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "index_inputs.h"

namespace optim {
namespace {

class ShapeImpl : public Op {
 public:
  ShapeImpl(int64_t start, int64_t end) : start_(start), end_(end) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    int64_t b, e;
    range(*in[0], &b, &e);
    return {Shape{e - b}};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    int64_t b, e;
    range(*in[0].shape, &b, &e);
    std::copy(in[0].shape->begin() + b, in[0].shape->begin() + e, out[0].as<int64_t>());
  }

 private:
  // The dims [b, e) that the output lists: negative values count from the end, both clamped to [0, rank].
  void range(const Shape& s, int64_t* b, int64_t* e) const {
    const int64_t r = static_cast<int64_t>(s.size());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    *b = clamp(start_);
    *e = std::max(*b, clamp(end_));
  }
  int64_t start_, end_;
};

class SizeImpl : public Op {
 public:
  std::vector<Shape> infer(const std::vector<const Shape*>&) const override { return {Shape{}}; }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    out[0].as<int64_t>()[0] = in[0].numel();
  }
};

class ConstantOfShapeImpl : public Op {
 public:
  explicit ConstantOfShapeImpl(std::vector<uint8_t> value) : value_(std::move(value)) {}
  std::vector<Shape> infer(const std::vector<const Shape*>&) const override {
    throw Error("ConstantOfShape needs the values of its shape input");
  }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const auto* shape = index_values(in, values, 0, "shape");
    if (!shape) throw Error("ConstantOfShape needs a shape");
    for (int64_t d : *shape)
      if (d < 0) throw Error("ConstantOfShape shape " + values_str(*shape) + " has a negative dimension");
    return {Shape(shape->begin(), shape->end())};
  }
  void run(const RunContext&, const std::vector<TensorRef>&, const std::vector<TensorOut>& out) const override {
    const int64_t n = out[0].numel();
    auto* y = static_cast<uint8_t*>(out[0].data);
    const size_t size = value_.size();
    if (n == 0) return;
    if (std::all_of(value_.begin(), value_.end(), [](uint8_t b) { return b == 0; })) {
      std::memset(y, 0, static_cast<size_t>(n) * size);
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(y + static_cast<size_t>(i) * size, value_.data(), size);
  }

 private:
  std::vector<uint8_t> value_;  // one element of the output's type
};

// Range: out[i] = start + i * delta by repeated addition, ceil((limit - start) / delta) elements, the way
// ONNX Runtime computes both (the length in double from the difference taken in the input type).
class RangeImpl : public Op {
 public:
  explicit RangeImpl(DType dtype) : dtype_(dtype) {}
  std::vector<Shape> infer(const std::vector<const Shape*>&) const override { throw Error("Range needs the values of its inputs"); }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    static const char* what[] = {"start", "limit", "delta"};
    std::vector<int64_t> v(3);
    for (size_t i = 0; i < 3; ++i) {
      const auto* vals = index_values(in, values, i, what[i]);
      if (!vals || vals->size() != 1) throw Error(std::string("Range ") + what[i] + " is not a single value");
      v[i] = (*vals)[0];
    }
    return {Shape{length(v[0], v[1], v[2])}};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t n = out[0].numel();
    switch (dtype_) {
      case DType::kFloat32: return fill(in[0].as<float>()[0], in[2].as<float>()[0], out[0].as<float>(), n);
      case DType::kInt32: return fill(in[0].as<int32_t>()[0], in[2].as<int32_t>()[0], out[0].as<int32_t>(), n);
      default: return fill(in[0].as<int64_t>()[0], in[2].as<int64_t>()[0], out[0].as<int64_t>(), n);
    }
  }

 private:
  // The length from the shape values (float32 ones as bit patterns, integers as int64).
  int64_t length(int64_t start, int64_t limit, int64_t delta) const {
    double q;
    if (dtype_ == DType::kFloat32) {
      const float s = float_from_bits(start), l = float_from_bits(limit), d = float_from_bits(delta);
      if (d == 0.f) throw Error("Range delta is 0");
      q = std::ceil((1.0 * (l - s)) / d);
    } else {
      if (delta == 0) throw Error("Range delta is 0");
      // The difference wraps as the input type's would (int32 values always fit in int64).
      const int64_t diff = static_cast<int64_t>(static_cast<uint64_t>(limit) - static_cast<uint64_t>(start));
      q = std::ceil((1.0 * static_cast<double>(diff)) / static_cast<double>(delta));
    }
    if (!(q < 9.2e18)) throw Error("Range length ceil((limit - start) / delta) is not a number or too large");
    return q > 0 ? static_cast<int64_t>(q) : 0;
  }
  template <typename T>
  static void fill(T start, T delta, T* y, int64_t n) {
    T v = start;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = v;
      v = add(v, delta);
    }
  }
  template <typename T>
  static T add(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));  // wraps, no UB
    else
      return a + b;
  }
  DType dtype_;
};

std::string check_shape_source(const Node& n, const Graph& g) {
  if (n.op == "Shape" || n.op == "Size") {
    std::string r = require_fixed_size(g, n, 0);
    if (!r.empty()) return r;
  }
  return feeds_a_shape(n, g);
}

// value: one element of a fixed-size type (default float32 0).
std::string check_constant_of_shape(const Node& n, const Graph& g) {
  if (const Tensor* t = n.attr_tensor("value")) {
    if (dtype_size(t->dtype) == 0 || t->dtype == DType::kString)
      return std::string("ConstantOfShape value of type ") + dtype_name(t->dtype) + " is not supported";
    if (t->numel() != 1 || t->bytes.size() != dtype_size(t->dtype)) return "ConstantOfShape value is not one readable element";
  } else if (n.has_attr("value")) {
    return "ConstantOfShape value attribute is not a tensor OptimEP could read";
  }
  std::string r = require_index_input(g, n, 0, "shape");
  return r.empty() ? feeds_a_shape(n, g) : r;
}

std::string check_range(const Node& n, const Graph& g) {
  const ValueInfo* v = g.value(n.inputs[0]);
  if (v && v->dtype != DType::kFloat32 && v->dtype != DType::kInt64 && v->dtype != DType::kInt32)
    return std::string("Range of ") + dtype_name(v->dtype) + " is not supported (float32, int64, int32)";
  if (v && v->dtype == DType::kInt32) {
    static const char* what[] = {"start", "limit", "delta"};
    for (size_t i = 0; i < 3; ++i) {
      std::string r = require_index_input(g, n, i, what[i]);
      if (!r.empty()) return r;
    }
  }
  return feeds_a_shape(n, g);
}

std::unique_ptr<Op> create_shape(const Node& n, const Graph&) {
  return std::make_unique<ShapeImpl>(n.attr_i("start", 0), n.attr_i("end", std::numeric_limits<int64_t>::max()));
}
std::unique_ptr<Op> create_size(const Node&, const Graph&) { return std::make_unique<SizeImpl>(); }
std::unique_ptr<Op> create_constant_of_shape(const Node& n, const Graph&) {
  if (const Tensor* t = n.attr_tensor("value")) return std::make_unique<ConstantOfShapeImpl>(t->bytes);
  return std::make_unique<ConstantOfShapeImpl>(std::vector<uint8_t>(sizeof(float), 0));
}
std::unique_ptr<Op> create_range(const Node& n, const Graph& g) {
  const ValueInfo* v = g.value(n.inputs[0]);
  return std::make_unique<RangeImpl>(v ? v->dtype : DType::kFloat32);
}

std::vector<size_t> first_input_is_shape(const Node&) { return {0}; }
std::vector<size_t> range_shape_inputs(const Node&) { return {0, 1, 2}; }

}  // namespace

std::vector<OpDef> shape_source_op_defs() {
  // Versions after 15 (Shape, Size) and 9 (ConstantOfShape) add element types only.
  return {
      {"Shape", 1, 25, check_shape_source, create_shape},
      {"Size", 1, 25, check_shape_source, create_size},
      {"ConstantOfShape", 9, 25, check_constant_of_shape, create_constant_of_shape, first_input_is_shape},
      {"Range", 11, 11, check_range, create_range, range_shape_inputs},
  };
}

}  // namespace optim
