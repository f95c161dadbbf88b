// Softmax of one contiguous row (kernel_table.h, SoftmaxFn), the reference: y = exp(x - max) / sum.
#include <cmath>

#include "kernel_table.h"

namespace optim::kernels {

void softmax_f32_scalar(const float* x, float* y, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - mx);
    sum += y[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

}  // namespace optim::kernels
