// A QDQ Add folded into the integer unit (QGemm, NhwcQConv) that makes one of its operands, by
// rewrites/qadd_fold.cc: a residual connection, or a bias added after the product's own quantization (Linear
// layers exported as MatMul + Add). The unit quantizes its sums as before, then each tile of its output,
// while in cache, goes through QAdd's operations with the other operand (qbinary kernel: the float operations
// of DequantizeLinear, Add, optional Relu and QuantizeLinear in their order), so results equal the unfolded
// pair bit for bit, without writing and reading the unit's output again.
#pragma once

#include <optional>

#include "quant_params.h"

namespace optim {

// The unit's inputs for it: stage Stage::kAdd (unit_stages.h), the other operand then the QAdd's scales and zero
// points for the unit's output (operand a), the other operand (b) and its result.

// The parameters of a QAdd / QMul whose scales and zero points are n's inputs at[0..5] (sa, za, sb, zb, sy,
// zy); the int attribute relu_attr, when set, raises the floor to zy. Throws Error when one is not a scalar constant.
kernels::QBinaryParams read_qbinary_params(const Node& n, const Graph& g, const size_t (&at)[6], bool a_u8, bool b_u8,
                                           bool y_u8, const char* relu_attr);
// The same for a stage folded into a unit (kAdd, kGate), whose six scales and zero points follow its first input.
kernels::QBinaryParams read_stage_qbinary_params(const Node& n, const Graph& g, Stage s, bool a_u8, bool b_u8, bool y_u8,
                                                 const char* relu_attr);

// The attribute of a unit with a folded QAdd saying a Relu followed the Add.
constexpr const char* kQAddReluAttr = "then_add_relu";

class QAddAfter {
 public:
  QAddAfter() = default;
  // Inactive when n has no folded QAdd.
  QAddAfter(const Node& n, const Graph& g);
  explicit operator bool() const { return active_; }
  // Where the other operand lies in the node's inputs.
  size_t other_input() const { return other_input_; }
  // The other operand's row stride in elements for a unit output of shape y (rows of y's last dim): that
  // dim when it has y's shape, 0 when it is one row repeated (a bias). Throws Error otherwise.
  int64_t other_stride(const Shape& other, const Shape& y) const;
  // The Add as a convolution's epilogue (kernels::ConvQAdd) for the unit's epilogue ep, or nullopt when the
  // kernel cannot take it: its operand a must be the value ep quantizes (za = ep.out_zero, same type).
  std::optional<kernels::ConvQAdd> in_epilogue(const kernels::QgemmEpilogue& ep, const void* other, int64_t ldo) const;
  // Rows [m0, m1), columns [j0, j1) of y (row stride ldy) through the Add with `other` (row stride ldo), in place.
  void apply(const RunContext& rc, void* y, int64_t ldy, const void* other, int64_t ldo, int64_t m0, int64_t m1,
             int64_t j0, int64_t j1) const;

 private:
  bool active_ = false;
  size_t other_input_ = 0;
  kernels::QBinaryParams p_;
  std::string label_;
};

}  // namespace optim
