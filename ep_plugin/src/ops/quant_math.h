// Rounding and saturation shared by every quantizing op and epilogue, as ONNX specifies them.
#pragma once

#include <cmath>
#include <cstdint>

namespace optim {

// saturate(round_half_to_even(value) + zero_point) into [lo, hi]. std::nearbyint rounds half to
// even under the default floating-point environment, which ORT's threads keep. NaN gives 0 clamped.
inline int32_t round_and_saturate(float value, int32_t zero_point, int32_t lo, int32_t hi) {
  const float r = std::nearbyint(value) + static_cast<float>(zero_point);
  if (!(r >= static_cast<float>(lo))) return r != r ? (0 < lo ? lo : (0 > hi ? hi : 0)) : lo;
  if (r > static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(r);
}

// QuantizeLinear of one value: x / scale, rounded half to even, plus the zero point, saturated.
inline int32_t quantize_value(float x, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  return round_and_saturate(x / scale, zero_point, lo, hi);
}

}  // namespace optim
