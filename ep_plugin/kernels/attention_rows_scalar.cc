// Attention over a key / value cache, the references (kernel_table.h, DotRowsFn and SumRowsFn): scores
// y[t] = scale * <x, rows[t]>, and the weighted sum y = sum_t w[t] rows[t], each sum in order.
#include "kernel_table.h"

namespace optim::kernels {

void dot_rows_f32_scalar(const float* x, const float* rows, int64_t ld, int64_t n, int64_t d, float scale, float* y) {
  for (int64_t t = 0; t < n; ++t) {
    float sum = 0.f;
    for (int64_t i = 0; i < d; ++i) sum += x[i] * rows[t * ld + i];
    y[t] = scale * sum;
  }
}

void sum_rows_f32_scalar(const float* w, const float* rows, int64_t ld, int64_t n, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i) y[i] = 0.f;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) y[i] += w[t] * rows[t * ld + i];
}

}  // namespace optim::kernels
