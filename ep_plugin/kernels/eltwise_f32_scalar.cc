// Scalar reference element-wise float32 kernels.
#include <algorithm>
#include <cmath>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline float apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
  }
  return 0.f;
}

}  // namespace

float unary_one(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kRelu: return (x > 0.f || x != x) ? x : 0.f;  // NaN propagates, as in ORT's CPU EP
    case UnaryOp::kSigmoid: return x >= 0.f ? 1.f / (1.f + std::exp(-x)) : std::exp(x) / (1.f + std::exp(x));
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kErf: return std::erf(x);
    case UnaryOp::kSqrt: return std::sqrt(x);
    case UnaryOp::kExp: return std::exp(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return std::fabs(x);
    case UnaryOp::kGelu: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.f + std::tanh(inner));
    }
  }
  return 0.f;
}

void binary_vv_f32_scalar(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = apply(op, a[i], b[i]);
}

void binary_vs_f32_scalar(BinaryOp op, const float* a, float b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = apply(op, a[i], b);
}

void binary_sv_f32_scalar(BinaryOp op, float a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = apply(op, a, b[i]);
}

void unary_f32_scalar(UnaryOp op, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = unary_one(op, x[i]);
}

void clip_f32_scalar(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = std::isnan(v) ? v : std::min(std::max(v, lo), hi);
  }
}

}  // namespace optim::kernels
