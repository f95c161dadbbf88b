// Comparisons (Equal, Greater, GreaterOrEqual, Less, LessOrEqual) to bool, the logical ops And, Or,
// Xor and Not on bool, and Where, all with numpy broadcasting: the ops that build attention masks.
// They run element by element (masks are small next to the tensors they mask).
#include <vector>

#include "broadcast.h"

namespace optim {
namespace {

enum class Compare { kEqual, kGreater, kGreaterOrEqual, kLess, kLessOrEqual };
enum class Logic { kAnd, kOr, kXor };

template <typename T>
bool compare(Compare c, T a, T b) {
  switch (c) {
    case Compare::kEqual: return a == b;
    case Compare::kGreater: return a > b;
    case Compare::kGreaterOrEqual: return a >= b;
    case Compare::kLess: return a < b;
    case Compare::kLessOrEqual: return a <= b;
  }
  return false;
}

class CompareImpl : public Op {
 public:
  explicit CompareImpl(Compare c) : c_(c) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {broadcast_shapes(*in[0], *in[1])}; }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    switch (in[0].dtype) {
      case DType::kFloat32: return run_typed<float>(in, out);
      case DType::kFloat64: return run_typed<double>(in, out);
      case DType::kInt64: return run_typed<int64_t>(in, out);
      case DType::kInt32: return run_typed<int32_t>(in, out);
      case DType::kInt16: return run_typed<int16_t>(in, out);
      case DType::kInt8: return run_typed<int8_t>(in, out);
      case DType::kUint64: return run_typed<uint64_t>(in, out);
      case DType::kUint32: return run_typed<uint32_t>(in, out);
      case DType::kUint16: return run_typed<uint16_t>(in, out);
      default: return run_typed<uint8_t>(in, out);  // uint8, bool
    }
  }

 private:
  template <typename T>
  void run_typed(const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const {
    const T* a = in[0].as<T>();
    const T* b = in[1].as<T>();
    uint8_t* y = out[0].as<uint8_t>();
    for_each_broadcast<2>(*out[0].shape, {in[0].shape, in[1].shape},
                          [&](int64_t o, const std::array<int64_t, 2>& at) { y[o] = compare(c_, a[at[0]], b[at[1]]); });
  }
  Compare c_;
};

class LogicImpl : public Op {
 public:
  explicit LogicImpl(Logic l) : l_(l) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {broadcast_shapes(*in[0], *in[1])}; }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const uint8_t* a = in[0].as<uint8_t>();
    const uint8_t* b = in[1].as<uint8_t>();
    uint8_t* y = out[0].as<uint8_t>();
    for_each_broadcast<2>(*out[0].shape, {in[0].shape, in[1].shape}, [&](int64_t o, const std::array<int64_t, 2>& at) {
      const bool p = a[at[0]] != 0, q = b[at[1]] != 0;
      y[o] = l_ == Logic::kAnd ? (p && q) : l_ == Logic::kOr ? (p || q) : (p != q);
    });
  }

 private:
  Logic l_;
};

class NotImpl : public Op {
 public:
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const uint8_t* x = in[0].as<uint8_t>();
    uint8_t* y = out[0].as<uint8_t>();
    for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = x[i] == 0;
  }
};

// Where(condition, X, Y): X where the condition holds, else Y; X and Y of any fixed-size type.
class WhereImpl : public Op {
 public:
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {broadcast_shapes(broadcast_shapes(*in[0], *in[1]), *in[2])};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const uint8_t* c = in[0].as<uint8_t>();
    const size_t size = dtype_size(in[1].dtype);
    for_each_broadcast<3>(*out[0].shape, {in[0].shape, in[1].shape, in[2].shape},
                          [&](int64_t o, const std::array<int64_t, 3>& at) {
                            if (c[at[0]]) copy_element(in[1].data, at[1], out[0].data, o, size);
                            else copy_element(in[2].data, at[2], out[0].data, o, size);
                          });
  }
};

std::string require_type(const Graph& g, const Node& n, size_t i, const std::vector<DType>& ok, const char* what) {
  const ValueInfo* v = g.value(n.inputs[i]);
  if (!v) return "";
  for (DType t : ok)
    if (v->dtype == t) return "";
  return std::string("input '") + n.inputs[i] + "' is " + dtype_name(v->dtype) + " (OptimEP's " + n.op + " takes " + what + ")";
}

// Numbers of any width (Equal: and bool).
std::string check_compare(const Node& n, const Graph& g) {
  std::vector<DType> ok{DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8,
                        DType::kUint64, DType::kUint32, DType::kUint16, DType::kUint8};
  if (n.op == "Equal") ok.push_back(DType::kBool);
  const char* what = "float32/64 or integers (Equal: also bool)";
  std::string r = require_type(g, n, 0, ok, what);
  return r.empty() ? require_type(g, n, 1, ok, what) : r;
}

std::string check_logic(const Node& n, const Graph& g) {
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    std::string r = require_type(g, n, i, {DType::kBool}, "bool");
    if (!r.empty()) return r;
  }
  return "";
}

std::string check_where(const Node& n, const Graph& g) {
  std::string r = require_type(g, n, 0, {DType::kBool}, "a bool condition");
  if (r.empty()) r = require_fixed_size(g, n, 1);
  return r.empty() ? require_fixed_size(g, n, 2) : r;
}

std::unique_ptr<Op> create_compare(const Node& n, const Graph&) {
  const Compare c = n.op == "Equal" ? Compare::kEqual : n.op == "Greater" ? Compare::kGreater
                    : n.op == "GreaterOrEqual" ? Compare::kGreaterOrEqual : n.op == "Less" ? Compare::kLess
                                                                          : Compare::kLessOrEqual;
  return std::make_unique<CompareImpl>(c);
}
std::unique_ptr<Op> create_logic(const Node& n, const Graph&) {
  if (n.op == "Not") return std::make_unique<NotImpl>();
  return std::make_unique<LogicImpl>(n.op == "And" ? Logic::kAnd : n.op == "Or" ? Logic::kOr : Logic::kXor);
}
std::unique_ptr<Op> create_where(const Node&, const Graph&) { return std::make_unique<WhereImpl>(); }

}  // namespace

std::vector<OpDef> logical_op_defs() {
  return {
      {"Equal", 7, 19, check_compare, create_compare},
      {"Greater", 7, 13, check_compare, create_compare},
      {"GreaterOrEqual", 12, 16, check_compare, create_compare},
      {"Less", 7, 13, check_compare, create_compare},
      {"LessOrEqual", 12, 16, check_compare, create_compare},
      {"And", 7, 7, check_logic, create_logic},
      {"Or", 7, 7, check_logic, create_logic},
      {"Xor", 7, 7, check_logic, create_logic},
      {"Not", 1, 1, check_logic, create_logic},
      {"Where", 9, 16, check_where, create_where},
  };
}

}  // namespace optim
