// Scalar reference QuantizeLinear / DequantizeLinear (per tensor) and quantized Add / Mul; see kernel_table.h.
#include <cmath>
#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {

namespace {
// QuantizeLinear of one value: saturate(round_half_even(x / scale) + zero), as int32.
inline int32_t quantized(float x, float scale, int32_t zero_point, bool to_u8) {
  const float lo = to_u8 ? 0.f : -128.f, hi = to_u8 ? 255.f : 127.f;
  float v = std::nearbyint(x / scale) + static_cast<float>(zero_point);
  v = v >= lo ? v : lo;  // NaN fails the test: the type's minimum
  v = v <= hi ? v : hi;
  return static_cast<int32_t>(v);
}
}  // namespace

void quantize_f32_scalar(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = quantized(x[i], scale, zero_point, to_u8);
    if (to_u8) static_cast<uint8_t*>(q)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(q)[i] = static_cast<int8_t>(v);
  }
}

void quantize_pixels_f32_scalar(const float* x, int64_t plane, int64_t channels, int64_t n, const QuantizePixelsArgs& a,
                                void* out) {
  const int32_t flip = a.to_u8 ? 0 : 128;
  for (int64_t p = 0; p < n; ++p)
    for (int64_t c = 0; c < a.kt; ++c) {
      const bool real = c < channels;
      const int32_t q = real ? quantized(x[c * plane + p], a.scale, a.zero, a.to_u8) : 0;
      if (a.wide) static_cast<int16_t*>(out)[p * a.kt + c] = static_cast<int16_t>(real ? q - a.zero : 0);
      else static_cast<uint8_t*>(out)[p * a.kt + c] = real ? static_cast<uint8_t>(q + flip) : a.pad;
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
