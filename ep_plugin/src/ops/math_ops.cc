// Element-wise math beyond Add/Sub/Mul/Div: Reciprocal, Floor, Ceil, Round, Softplus, Elu, Sin, Cos (float32),
// Pow (float32 base, float32 or 32/64-bit integer exponent, numpy broadcasting; x^2, x^3 and x^0.5 on their fast paths),
// and variadic Max/Min with broadcasting (float32 through the kernel table; float64 and every integer type
// element by element). The float32 work runs on the math_unary / math_binary kernels.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "broadcast.h"
#include "broadcast_runs.h"

namespace optim {
namespace {

using kernels::MathBinaryOp;
using kernels::MathOp;

// y[i] = op(x[i]) through the math_unary kernel, in parallel chunks.
void map_f32(const RunContext& rc, MathOp op, float param, const float* x, float* y, int64_t n) {
  parallel_chunks(rc, n, [&](int64_t s, int64_t e) { rc.kernels.math_unary(op, param, x + s, y + s, e - s); });
}

class MathUnaryImpl : public Op {
 public:
  MathUnaryImpl(MathOp op, float param) : op_(op), param_(param) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    map_f32(rc, op_, param_, in[0].as<float>(), out[0].as<float>(), in[0].numel());
  }

 private:
  MathOp op_;
  float param_;
};

// Runs a float32 binary kernel over the broadcast of a and b into y (y may be a when a has y's shape).
void binary_f32(const RunContext& rc, MathBinaryOp op, const float* a, const Shape& sa, const float* b, const Shape& sb,
                float* y, const Shape& sy) {
  if (shape_numel(sy) == 0) return;
  const BroadcastRuns runs(sy, sa, sb);
  const int64_t len = runs.len();
  runs.parallel(rc, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t ia, ib;
      runs.offsets(row, &ia, &ib);
      rc.kernels.math_binary(op, a + ia, runs.a_step, b + ib, runs.b_step, y + row * len, len);
    }
  });
}

float integer_as_float(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kInt64: return static_cast<float>(t.as<int64_t>()[i]);
    case DType::kInt32: return static_cast<float>(t.as<int32_t>()[i]);
    case DType::kUint64: return static_cast<float>(t.as<uint64_t>()[i]);
    default: return static_cast<float>(t.as<uint32_t>()[i]);
  }
}

// Pow(X float32, Y float32 | int32 | int64 | uint32 | uint64). A single exponent takes the unary kernel (x*x, x*x*x and sqrt where
// ONNX Runtime squares, cubes or takes powf(x, 0.5)); integer exponents are converted to float32
// (exact below 2^24).
class PowImpl : public Op {
 public:
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {broadcast_shapes(*in[0], *in[1])}; }
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    return static_cast<size_t>(std::max<int64_t>(0, shape_numel(*in[1]))) * sizeof(float);
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t ne = in[1].numel();
    const float* e = in[1].as<float>();
    if (in[1].dtype != DType::kFloat32) {
      float* conv = static_cast<float*>(rc.scratch());
      for (int64_t i = 0; i < ne; ++i) conv[i] = integer_as_float(in[1], i);
      e = conv;
    }
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    if (ne == 1) {  // the output is X's elements in X's order
      const float p = e[0];
      const MathOp op = p == 2.f ? MathOp::kSquare : p == 3.f ? MathOp::kCube : p == 0.5f ? MathOp::kSqrt : MathOp::kPow;
      map_f32(rc, op, p, x, y, out[0].numel());
      return;
    }
    binary_f32(rc, MathBinaryOp::kPow, x, *in[0].shape, e, *in[1].shape, y, *out[0].shape);
  }
};

template <typename T>
T pick(bool is_max, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;  // NaN wins, as in ONNX Runtime
    if (b != b) return b;
  }
  return is_max ? (a < b ? b : a) : (b < a ? b : a);
}

// Max / Min of any number of inputs, folded left to right into the output.
class MinMaxImpl : public Op {
 public:
  explicit MinMaxImpl(bool is_max) : is_max_(is_max) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    Shape s = *in[0];
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i]) s = broadcast_shapes(s, *in[i]);
    return {s};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& sy = *out[0].shape;
    if (shape_numel(sy) == 0) return;
    const size_t size = dtype_size(out[0].dtype);
    size_t next = 1;
    // Start from input 0 broadcast to the output, or from the first pair when it already fills the output.
    if (in.size() > 1 && broadcast_shapes(*in[0].shape, *in[1].shape) == sy) {
      fold(rc, in[0].data, *in[0].shape, in[1], out[0]);
      next = 2;
    } else if (in[0].numel() == out[0].numel()) {
      std::memcpy(out[0].data, in[0].data, static_cast<size_t>(out[0].numel()) * size);
    } else {
      for_each_broadcast<1>(sy, {in[0].shape}, [&](int64_t o, const std::array<int64_t, 1>& at) {
        copy_element(in[0].data, at[0], out[0].data, o, size);
      });
    }
    for (size_t i = next; i < in.size(); ++i) fold(rc, out[0].data, sy, in[i], out[0]);
  }

 private:
  // y = op(a, b) over the broadcast into y (a may be y itself).
  void fold(const RunContext& rc, const void* a, const Shape& sa, const TensorRef& b, const TensorOut& y) const {
    switch (y.dtype) {
      case DType::kFloat32:
        return binary_f32(rc, is_max_ ? MathBinaryOp::kMax : MathBinaryOp::kMin, static_cast<const float*>(a), sa, b.as<float>(),
                          *b.shape, y.as<float>(), *y.shape);
      case DType::kFloat64: return fold_typed<double>(rc, a, sa, b, y);
      case DType::kInt64: return fold_typed<int64_t>(rc, a, sa, b, y);
      case DType::kInt32: return fold_typed<int32_t>(rc, a, sa, b, y);
      case DType::kInt16: return fold_typed<int16_t>(rc, a, sa, b, y);
      case DType::kInt8: return fold_typed<int8_t>(rc, a, sa, b, y);
      case DType::kUint64: return fold_typed<uint64_t>(rc, a, sa, b, y);
      case DType::kUint32: return fold_typed<uint32_t>(rc, a, sa, b, y);
      case DType::kUint16: return fold_typed<uint16_t>(rc, a, sa, b, y);
      case DType::kUint8: return fold_typed<uint8_t>(rc, a, sa, b, y);
      default: throw Error(std::string(is_max_ ? "Max" : "Min") + " does not run on " + dtype_name(y.dtype));
    }
  }
  template <typename T>
  void fold_typed(const RunContext& rc, const void* a_data, const Shape& sa, const TensorRef& b_ref, const TensorOut& y_out) const {
    const BroadcastRuns runs(*y_out.shape, sa, *b_ref.shape);
    const T* a = static_cast<const T*>(a_data);
    const T* b = b_ref.as<T>();
    T* y = y_out.as<T>();
    const int64_t len = runs.len(), as = runs.a_step, bs = runs.b_step;
    const bool is_max = is_max_;
    runs.parallel(rc, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        int64_t ia, ib;
        runs.offsets(row, &ia, &ib);
        T* yr = y + row * len;
        for (int64_t i = 0; i < len; ++i) yr[i] = pick(is_max, a[ia + i * as], b[ib + i * bs]);
      }
    });
  }
  bool is_max_;
};

// The float32 unary ops: name, the opset range implemented (later versions add float16 / bfloat16 only), kernel op.
struct UnaryMathOp {
  const char* name;
  int min_opset, max_opset;
  MathOp kind;
};
constexpr UnaryMathOp kUnaryMathOps[] = {
    {"Reciprocal", 6, 13, MathOp::kReciprocal}, {"Floor", 6, 13, MathOp::kFloor}, {"Ceil", 6, 13, MathOp::kCeil},
    {"Round", 11, 22, MathOp::kRound},          {"Softplus", 1, 22, MathOp::kSoftplus}, {"Elu", 6, 22, MathOp::kElu},
    {"Sin", 7, 22, MathOp::kSin},               {"Cos", 7, 22, MathOp::kCos},
};

std::string check_math_unary(const Node& n, const Graph& g) { return require_float(g, n, 0); }

std::string check_pow(const Node& n, const Graph& g) {
  std::string r = require_float(g, n, 0);
  if (!r.empty()) return r;
  const ValueInfo* e = g.value(n.inputs[1]);
  if (e && e->dtype != DType::kFloat32 && e->dtype != DType::kInt32 && e->dtype != DType::kInt64 && e->dtype != DType::kUint32 &&
      e->dtype != DType::kUint64)
    return "exponent '" + n.inputs[1] + "' is " + dtype_name(e->dtype) + " (OptimEP's Pow takes float32 or 32/64-bit integers)";
  return "";
}

std::string check_minmax(const Node& n, const Graph& g) {
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!n.has_input(i)) return n.op + " with an omitted input";
    const ValueInfo* v = g.value(n.inputs[i]);
    if (!v) continue;
    switch (v->dtype) {
      case DType::kFloat32: case DType::kFloat64: case DType::kInt64: case DType::kInt32: case DType::kInt16: case DType::kInt8:
      case DType::kUint64: case DType::kUint32: case DType::kUint16: case DType::kUint8: break;
      default:
        return "input '" + n.inputs[i] + "' is " + dtype_name(v->dtype) + " (OptimEP's " + n.op +
               " runs float32, float64 and integers)";
    }
  }
  return n.inputs.empty() ? n.op + " without inputs" : "";
}

std::unique_ptr<Op> create_math_unary(const Node& n, const Graph&) {
  for (const UnaryMathOp& u : kUnaryMathOps)
    if (n.op == u.name) return std::make_unique<MathUnaryImpl>(u.kind, n.op == "Elu" ? n.attr_f("alpha", 1.f) : 0.f);
  throw Error("op " + n.op + " is not a unary math op");
}
std::unique_ptr<Op> create_pow(const Node&, const Graph&) { return std::make_unique<PowImpl>(); }
std::unique_ptr<Op> create_minmax(const Node& n, const Graph&) { return std::make_unique<MinMaxImpl>(n.op == "Max"); }

}  // namespace

std::vector<OpDef> math_op_defs() {
  std::vector<OpDef> defs;
  for (const UnaryMathOp& u : kUnaryMathOps)
    defs.push_back({u.name, u.min_opset, u.max_opset, check_math_unary, create_math_unary});
  // Pow 12-15 and Max/Min 12-13 add integer and bfloat16 types: the checks refuse the ones not run here.
  defs.push_back({"Pow", 7, 15, check_pow, create_pow});
  defs.push_back({"Max", 6, 13, check_minmax, create_minmax});
  defs.push_back({"Min", 6, 13, check_minmax, create_minmax});
  return defs;
}

}  // namespace optim
