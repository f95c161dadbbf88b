// The quantization parameters an integer unit reads from its node's constant inputs (QuantParams), the
// scalar scales and zero points every quantized op reads, and the inputs of the internal QAdd / QMul nodes.
// Shared by the units (qgemm.h, qconv_nhwc.h) and the stages folded into them (qadd_after.h, dequantize_after.h).
#pragma once

#include <string>
#include <vector>

#include "op.h"
#include "unit_stages.h"

namespace optim {

// The quantization parameters of a fused unit, read from its node's constant inputs.
struct QuantParams {
  DType x_dtype = DType::kUint8;
  int32_t x_zero = 0;
  float x_scale = 1.f;
  const Tensor* w_scales = nullptr;  // one value, or one per output channel
  const Tensor* w_zeros = nullptr;   // absent, or like w_scales
  std::vector<float> bias_values;    // empty, one value, or one per output channel
  float y_scale = 1.f;
  kernels::QgemmEpilogue epilogue;   // output type, y zero point, saturation (with Relu)

  float w_scale(int64_t channel) const;
  int32_t w_zero(int64_t channel) const;
  // The epilogue's scale and bias (kernel_table.h): in output steps, x_scale * w_scale / y_scale and
  // bias / y_scale. bias() is empty when there is none.
  float out_scale(int64_t channel) const;
  std::vector<float> out_scales(int64_t channels) const;
  std::vector<float> bias(int64_t channels) const;
  // The weights w of `channels` output channels, each a row of k values, minus their channel's zero point, as
  // int16 rows (the value every integer unit multiplies by; exact: |w - zero| <= 255).
  std::vector<int16_t> centered_rows(const Tensor& w, int64_t channels, int64_t k) const;
};
// Throws Error when an input is not the constant the fusion promised.
QuantParams read_quant_params(const Node& n, const Graph& g);
// Element i of a uint8/int8 constant (weights, zero points) as int32.
inline int32_t int8_at(const Tensor& t, int64_t i) {
  return t.dtype == DType::kUint8 ? static_cast<int32_t>(t.data<uint8_t>()[i]) : static_cast<int32_t>(t.data<int8_t>()[i]);
}
// Whether value v is uint8 (or of unknown type: the rewrites that build integer ops checked it is uint8 or int8).
inline bool is_u8(const Graph& g, const std::string& v) {
  const ValueInfo* vi = g.value(v);
  return !vi || vi->dtype == DType::kUint8;
}
// A scale: constant `name` as one float32 (else Error naming `what`); a zero point: one uint8/int8 constant, 0
// when `name` is empty.
float float_scalar(const Graph& g, const std::string& name, const char* what);
int32_t zero_point(const Graph& g, const std::string& name);

// Input positions of an internal QAdd / QMul node; attribute relu as for QGemm.
enum QBinaryInput : size_t {
  kQBinaryA = 0, kQBinaryAScale, kQBinaryAZero, kQBinaryB, kQBinaryBScale, kQBinaryBZero, kQBinaryYScale, kQBinaryYZero,
  kQBinaryInputCount
};

}  // namespace optim
