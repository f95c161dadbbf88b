// Cast between float32/float64 and the integer and bool types. Floats become integers by truncation
// toward zero; NaN and values outside int64 become the x86 "integer indefinite" (the minimum), then
// narrower integer types keep the low bits (two's complement), as a C cast compiles on x86. Anything
// becomes bool as != 0; bool is 0 or 1. Every conversion is defined here (no C++ undefined behaviour).
#include <cmath>
#include <cstring>
#include <limits>

#include "op.h"

namespace optim {
namespace {

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

bool castable(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kFloat64: case DType::kInt64: case DType::kInt32: case DType::kInt16:
    case DType::kInt8: case DType::kUint8: case DType::kUint16: case DType::kUint32: case DType::kBool:
      return true;
    default:
      return false;
  }
}

// Reads element i as double (float types) or int64 (the others).
double read_float(const void* p, DType t, int64_t i) {
  return t == DType::kFloat32 ? static_cast<const float*>(p)[i] : static_cast<const double*>(p)[i];
}
int64_t read_int(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kInt64: return static_cast<const int64_t*>(p)[i];
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DType::kUint16: return static_cast<const uint16_t*>(p)[i];
    case DType::kUint32: return static_cast<const uint32_t*>(p)[i];
    default: return static_cast<const uint8_t*>(p)[i];  // uint8, bool
  }
}

int64_t float_to_int(double v) {
  // [-2^63, 2^63) is exactly representable as double bounds.
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

void write_int(void* p, DType t, int64_t i, int64_t v) {
  const uint64_t bits = static_cast<uint64_t>(v);  // narrowing below keeps the low bits
  switch (t) {
    case DType::kInt64: static_cast<int64_t*>(p)[i] = v; break;
    case DType::kInt32: { const auto x = static_cast<uint32_t>(bits); std::memcpy(static_cast<int32_t*>(p) + i, &x, 4); break; }
    case DType::kInt16: { const auto x = static_cast<uint16_t>(bits); std::memcpy(static_cast<int16_t*>(p) + i, &x, 2); break; }
    case DType::kInt8: { const auto x = static_cast<uint8_t>(bits); std::memcpy(static_cast<int8_t*>(p) + i, &x, 1); break; }
    case DType::kUint32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(bits); break;
    case DType::kUint16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(bits); break;
    default: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(bits); break;  // uint8
  }
}

void write_float(void* p, DType t, int64_t i, double v) {
  if (t == DType::kFloat64) {
    static_cast<double*>(p)[i] = v;
    return;
  }
  const double big = std::numeric_limits<float>::max();
  // Finite doubles beyond float's range round to infinity (IEEE), spelled out: that C++ cast is undefined.
  static_cast<float*>(p)[i] = v > big ? std::numeric_limits<float>::infinity()
                              : v < -big ? -std::numeric_limits<float>::infinity() : static_cast<float>(v);
}

class CastImpl : public Op {
 public:
  explicit CastImpl(DType to) : to_(to) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const DType from = in[0].dtype;
    const int64_t n = in[0].numel();
    const void* x = in[0].data;
    void* y = out[0].data;
    if (from == to_) {
      if (n) std::memcpy(y, x, static_cast<size_t>(n) * dtype_size(from));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (to_ == DType::kBool) {
        static_cast<uint8_t*>(y)[i] = is_float(from) ? read_float(x, from, i) != 0.0 : read_int(x, from, i) != 0;
      } else if (is_float(to_)) {
        write_float(y, to_, i, is_float(from) ? read_float(x, from, i) : static_cast<double>(read_int(x, from, i)));
      } else {
        write_int(y, to_, i, is_float(from) ? float_to_int(read_float(x, from, i)) : read_int(x, from, i));
      }
    }
  }

 private:
  DType to_;
};

DType cast_target(const Node& n) {
  return dtype_from_onnx(static_cast<ONNXTensorElementDataType>(n.attr_i("to", 0)));
}

std::string check_cast(const Node& n, const Graph& g) {
  const ValueInfo* v = g.value(n.inputs[0]);
  if (v && !castable(v->dtype)) return std::string("Cast from ") + dtype_name(v->dtype) + " is not supported";
  const DType to = cast_target(n);
  if (!castable(to)) return std::string("Cast to ") + dtype_name(to) + " is not supported";
  if (n.has_attr("saturate") && n.attr_i("saturate", 1) != 1) return "Cast saturate=0 is not supported";
  return "";
}

std::unique_ptr<Op> create_cast(const Node& n, const Graph&) { return std::make_unique<CastImpl>(cast_target(n)); }

}  // namespace

// Opsets 19-25 only add float8/float4/int4/int2 types, which check_cast refuses.
std::vector<OpDef> cast_op_defs() { return {{"Cast", 6, 25, check_cast, create_cast}}; }

}  // namespace optim
