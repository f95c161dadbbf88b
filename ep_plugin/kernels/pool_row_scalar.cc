// Scalar pooling rows (kernel_table.h, PoolRowFn): the reference the vector kernels follow.
#include "kernel_table.h"

namespace optim::kernels {
namespace {

template <typename T>
void max_row(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = (y[i] < x[i] || x[i] != x[i]) ? x[i] : y[i];  // NaN wins
}

}  // namespace

void pool_row_scalar(PoolRowOp op, const void* x, void* y, int64_t n) {
  switch (op) {
    case PoolRowOp::kMaxF32: return max_row(static_cast<const float*>(x), static_cast<float*>(y), n);
    case PoolRowOp::kMaxU8: return max_row(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n);
    case PoolRowOp::kMaxS8: return max_row(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), n);
    case PoolRowOp::kAddF32: {
      const float* a = static_cast<const float*>(x);
      float* b = static_cast<float*>(y);
      for (int64_t i = 0; i < n; ++i) b[i] += a[i];
      return;
    }
  }
}

}  // namespace optim::kernels
