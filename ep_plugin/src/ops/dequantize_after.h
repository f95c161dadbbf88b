// A DequantizeLinear (and the bias Add after it) folded into the QGemm whose uint8 output it alone reads, by
// rewrites/dequantize_fold.cc: transformers quantized MatMul-only leave QGemm -> DequantizeLinear -> Add(bias)
// -> float ops. The QGemm quantizes its sums as before into a scratch tile, and each finished tile, while in
// cache, is dequantized and the bias added into the float output: the operations of DequantizeLinear and Add in
// their order (bytes equal to the three steps apart), without storing and reading the uint8 tensor and the
// dequantized one. A GELU after them folds in too, and the QuantizeLinear after that (a Linear layer's
// activation before the next quantized MatMul): then the output is that QuantizeLinear's, and the float values
// live only in a row buffer of the thread (the unary and quantize kernels give every value the same bits
// wherever it lies in a row). Then each output byte depends only on its column and the QGemm's byte: prepare()
// tabulates the 256 results per column with the same kernels (bytes equal to computing them), and a tile is
// looked up instead of going through four float passes (GELU's erf alone cost a tenth of MiniLM's int8 run).
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
  // With the QuantizeLinear folded: the per-column tables, computed with the kernels the plan runs with.
  void prepare(const kernels::KernelTable& kt);
  // Rows [m0, m1), columns [j0, j1) of the uint8 tile q (row stride ld) into y (the same stride): (q - zero) *
  // scale, then + bias[j], then GELU; float32 values, or with the QuantizeLinear folded its uint8/int8 bytes.
  void apply(const RunContext& rc, const uint8_t* q, void* y, int64_t ld, int64_t m0, int64_t m1, int64_t j0,
             int64_t j1) const;

 private:
  // Columns [j0, j0 + n) of one row of the QGemm's bytes q: dequantized (and biased, GELU'd) into v, then, when
  // requantized, quantized into `requantized`. apply() runs it per row; prepare() tabulates it.
  void row(const kernels::KernelTable& kt, const uint8_t* q, int64_t j0, int64_t n, float* v, uint8_t* requantized) const;
  // Tables are kept to this many columns (256 bytes each: 4 MiB).
  static constexpr int64_t kMaxTableColumns = 16384;
  bool active_ = false;
  int64_t columns_ = 0;
  std::vector<uint8_t> table_;  // [column][QGemm byte] -> output byte, when requantized
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
