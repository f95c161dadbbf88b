// Scalar reference QuantizeLinear / DequantizeLinear (per tensor) and quantized Add / Mul; see kernel_table.h.
#include <cmath>
#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {

void quantize_f32_scalar(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n) {
  const float lo = to_u8 ? 0.f : -128.f, hi = to_u8 ? 255.f : 127.f;
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(x[i] / scale) + static_cast<float>(zero_point);
    v = v >= lo ? v : lo;  // NaN fails the test: the type's minimum
    v = v <= hi ? v : hi;
    if (to_u8) static_cast<uint8_t*>(q)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(q)[i] = static_cast<int8_t>(v);
  }
}

void dequantize_f32_scalar(const void* q, bool from_u8, int32_t zero_point, float scale, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = from_u8 ? static_cast<const uint8_t*>(q)[i] : static_cast<const int8_t*>(q)[i];
    x[i] = static_cast<float>(v - zero_point) * scale;
  }
}

void qbinary_q8_scalar(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  auto load = [](const void* t, bool u8, int64_t i) -> int32_t {
    return u8 ? static_cast<const uint8_t*>(t)[i] : static_cast<const int8_t*>(t)[i];
  };
  const float lo = static_cast<float>(p.qmin), hi = static_cast<float>(p.qmax);
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(load(a, p.a_u8, i) - p.za) * p.sa;
    const float fb = static_cast<float>(load(b, p.b_u8, i) - p.zb) * p.sb;
    float v = std::nearbyint((p.mul ? fa * fb : fa + fb) / p.sy) + static_cast<float>(p.zy);
    v = v >= lo ? v : lo;  // NaN fails the test: the minimum
    v = v <= hi ? v : hi;
    if (p.y_u8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
  }
}

}  // namespace optim::kernels
