// Scalar pooling windows (kernel_table.h, PoolWindowFn): the reference the vector kernels follow.
#include "kernel_table.h"

namespace optim::kernels {
namespace {

template <typename T>
void max_window(const T* x, const int64_t* tap, int64_t taps, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T m = x[tap[0] + i];
    for (int64_t t = 1; t < taps; ++t) {
      const T v = x[tap[t] + i];
      m = (m < v || v != v) ? v : m;  // NaN wins
    }
    y[i] = m;
  }
}

}  // namespace

void pool_window_scalar(PoolOp op, const void* x, const int64_t* tap, int64_t taps, void* y, int64_t n) {
  switch (op) {
    case PoolOp::kMaxF32: return max_window(static_cast<const float*>(x), tap, taps, static_cast<float*>(y), n);
    case PoolOp::kMaxU8: return max_window(static_cast<const uint8_t*>(x), tap, taps, static_cast<uint8_t*>(y), n);
    case PoolOp::kMaxS8: return max_window(static_cast<const int8_t*>(x), tap, taps, static_cast<int8_t*>(y), n);
    case PoolOp::kSumF32: {
      const float* a = static_cast<const float*>(x);
      float* b = static_cast<float*>(y);
      for (int64_t i = 0; i < n; ++i) {
        float s = 0.f;
        for (int64_t t = 0; t < taps; ++t) s += a[tap[t] + i];
        b[i] = s;
      }
      return;
    }
  }
}

}  // namespace optim::kernels
