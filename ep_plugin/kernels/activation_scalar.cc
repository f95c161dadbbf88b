// Scalar reference activations with parameters (kernel_table.h, ActivationFn): mul then add, then the
// clamps as comparisons that leave NaN in place, the order the vector kernels follow; SiLU as x times the
// reference sigmoid.
#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline float hard_sigmoid(float x, const ActivationParams& p) {
  float h = p.alpha * x + p.beta;
  h = h < 0.f ? 0.f : h;
  return h > 1.f ? 1.f : h;
}

}  // namespace

void activation_f32_scalar(ActivationOp op, const ActivationParams& p, const float* x, float* y, int64_t n) {
  switch (op) {
    case ActivationOp::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = hard_sigmoid(x[i], p);
      return;
    case ActivationOp::kHardSwish:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * hard_sigmoid(x[i], p);
      return;
    case ActivationOp::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] >= 0.f ? x[i] : p.alpha * x[i];
      return;
    case ActivationOp::kSilu:  // one element at a time: y may be x
      for (int64_t i = 0; i < n; ++i) {
        float s = 0.f;
        unary_f32_scalar(UnaryOp::kSigmoid, x + i, &s, 1);
        y[i] = x[i] * s;
      }
      return;
  }
}

}  // namespace optim::kernels
