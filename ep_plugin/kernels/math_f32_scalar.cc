// Scalar reference for the math_unary and math_binary families (kernel_table.h): the C library's functions,
// in the order ONNX Runtime's CPU EP evaluates them, so results match it within float rounding.
#include <cmath>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline float math_one(MathOp op, float p, float x) {
  switch (op) {
    case MathOp::kReciprocal: return 1.f / x;
    case MathOp::kFloor: return std::floor(x);
    case MathOp::kCeil: return std::ceil(x);
    case MathOp::kRound: return std::nearbyint(x);  // the default rounding mode: halves to even
    case MathOp::kSoftplus: return x > 0.f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    case MathOp::kElu: return x >= 0.f ? x : p * (std::exp(x) - 1.f);
    case MathOp::kSin: return std::sin(x);
    case MathOp::kCos: return std::cos(x);
    case MathOp::kPow: return std::pow(x, p);
    case MathOp::kSquare: return x * x;
    case MathOp::kCube: return x * x * x;
    case MathOp::kSqrt: return x == -INFINITY ? INFINITY : std::sqrt(x) + 0.f;  // + 0: -0 becomes +0, as powf gives
  }
  return x;
}

// NaN wins: a comparison with NaN is false, so test for it first.
inline float max_nan(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
inline float min_nan(float a, float b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }

}  // namespace

void math_unary_f32_scalar(MathOp op, float p, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = math_one(op, p, x[i]);
}

void math_binary_f32_scalar(MathBinaryOp op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  switch (op) {
    case MathBinaryOp::kPow:
      for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i * sa], b[i * sb]);
      return;
    case MathBinaryOp::kMax:
      for (int64_t i = 0; i < n; ++i) y[i] = max_nan(a[i * sa], b[i * sb]);
      return;
    case MathBinaryOp::kMin:
      for (int64_t i = 0; i < n; ++i) y[i] = min_nan(a[i * sa], b[i * sb]);
      return;
  }
}

}  // namespace optim::kernels
