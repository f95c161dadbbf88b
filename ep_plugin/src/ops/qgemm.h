// The integer units qdq_fusion.cc builds out of QDQ MatMul/Gemm (QGemm) and Conv (QConv) patterns,
// their shared quantization parameters, and the driver that splits an int8 GEMM over the pool.
#pragma once

#include <functional>

#include "op.h"

namespace optim {

// Domain of the ops OptimEP creates itself: never claimable from a user's model.
constexpr const char* kInternalDomain = "optim.internal";

// Input positions of an internal QGemm/QConv node (names of partition values; "" when absent).
// Attributes: transB (QGemm: W stored N x K), relu (a Relu sat between the product and the
// QuantizeLinear), and for QConv the Conv's own attributes.
enum QGemmInput : size_t {
  kQGemmX = 0, kQGemmXScale, kQGemmXZero, kQGemmW, kQGemmWScale, kQGemmWZero, kQGemmBias, kQGemmYScale, kQGemmYZero,
  kQGemmInputCount
};

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
  std::vector<float> bias(int64_t channels) const;
};
// Throws Error when an input is not the constant the fusion promised.
QuantParams read_quant_params(const Node& n, const Graph& g);
// Element i of a uint8/int8 constant (weights, zero points) as int32.
inline int32_t int8_at(const Tensor& t, int64_t i) {
  return t.dtype == DType::kUint8 ? static_cast<int32_t>(t.data<uint8_t>()[i]) : static_cast<int32_t>(t.data<int8_t>()[i]);
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

// One row of a quantized tensor (uint8/int8) minus its zero point, as int16, zero-filled from k to
// `padded` (K padded to even for the int16-pair kernels: a plain 0 is real 0).
template <typename T>
inline void widen_row(const T* __restrict x, int64_t k, int32_t zero, int64_t padded, int16_t* __restrict row) {
  for (int64_t kk = 0; kk < k; ++kk) row[kk] = static_cast<int16_t>(static_cast<int32_t>(x[kk]) - zero);
  for (int64_t kk = k; kk < padded; ++kk) row[kk] = 0;
}

// Called with rows [m0, m1) and columns [j0, j1) of C once the kernel has written them (j1 may pass n).
using TileDone = std::function<void(int64_t m0, int64_t m1, int64_t j0, int64_t j1)>;

// C = epilogue(A x B) over the pool, in tiles of rows x panels (see kernels::QgemmS16Fn); `done`, when given,
// sees each tile on the thread that made it.
void run_qgemm_s16(const RunContext& rc, int64_t m, int64_t n, int64_t kp, const int16_t* a, int64_t lda,
               const int16_t* b_packed, void* c, int64_t ldc, const kernels::QgemmEpilogue& ep,
               const TileDone* done = nullptr);

}  // namespace optim
