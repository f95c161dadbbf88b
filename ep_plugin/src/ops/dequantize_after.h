// A DequantizeLinear (and the bias Add after it) folded into the QGemm whose uint8 output it alone reads, by
// rewrites/dequantize_fold.cc: transformers quantized MatMul-only leave QGemm -> DequantizeLinear -> Add(bias)
// -> float ops. The QGemm quantizes its sums as before into a scratch tile, and each finished tile, while in
// cache, is dequantized and the bias added into the float output: the operations of DequantizeLinear and Add in
// their order (bytes equal to the three steps apart), without storing and reading the uint8 tensor and the
// dequantized one. A GELU after them folds in too, and the QuantizeLinear after that (a Linear layer's
// activation before the next quantized MatMul): then the output is that QuantizeLinear's, and the float values
// live only in a row buffer of the thread (the unary and quantize kernels give every value the same bits
// wherever it lies in a row).
#pragma once

#include "quant_params.h"

namespace optim {

// The QGemm's inputs for it: stage Stage::kDequantize (unit_stages.h), the DequantizeLinear's scale and zero point
// then the bias Add's constant (absent: no Add); with the QuantizeLinear, stage Stage::kRequantize after it, its
// scale and zero point. Attribute kThenGelu (op.h) marks a folded GELU.

class DequantizeAfter {
 public:
  DequantizeAfter() = default;
  // Inactive when n has no folded DequantizeLinear; `columns`: the GEMM's N (the bias's length).
  DequantizeAfter(const Node& n, const Graph& g, int64_t columns);
  explicit operator bool() const { return active_; }
  // Rows [m0, m1), columns [j0, j1) of the uint8 tile q (row stride ld) into y (the same stride): (q - zero) *
  // scale, then + bias[j], then GELU; float32 values, or with the QuantizeLinear folded its uint8/int8 bytes.
  void apply(const RunContext& rc, const uint8_t* q, void* y, int64_t ld, int64_t m0, int64_t m1, int64_t j0,
             int64_t j1) const;

 private:
  bool active_ = false;
  float scale_ = 1.f;
  int32_t zero_ = 0;
  std::vector<float> bias_;
  bool gelu_ = false;
  kernels::UnaryOp gelu_op_ = kernels::UnaryOp::kGelu;
  bool requantize_ = false, to_u8_ = true;
  float q_scale_ = 1.f;
  int32_t q_zero_ = 0;
};

}  // namespace optim
