// Scalar reference for col2im_row (kernel_table.h): one addition per element, in order.
#include "kernel_table.h"

namespace optim::kernels {

void col2im_row_f32_scalar(const float* x, float* y, int64_t stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i * stride] += x[i];
}

}  // namespace optim::kernels
