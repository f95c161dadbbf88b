// Scalar reference QuantizeLinear / DequantizeLinear (per tensor); see kernel_table.h.
#include <cmath>
#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {

void quantize_scalar(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n) {
  const float lo = to_u8 ? 0.f : -128.f, hi = to_u8 ? 255.f : 127.f;
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(x[i] / scale) + static_cast<float>(zero_point);
    v = v >= lo ? v : lo;  // NaN fails the test: the type's minimum
    v = v <= hi ? v : hi;
    if (to_u8) static_cast<uint8_t*>(q)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(q)[i] = static_cast<int8_t>(v);
  }
}

void dequantize_scalar(const void* q, bool from_u8, int32_t zero_point, float scale, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = from_u8 ? static_cast<const uint8_t*>(q)[i] : static_cast<const int8_t*>(q)[i];
    x[i] = static_cast<float>(v - zero_point) * scale;
  }
}

}  // namespace optim::kernels
