// A QAdd run on each tile of the unit that makes one of its operands (qadd_after.h).
#include "qadd_after.h"

namespace optim {

QAddAfter::QAddAfter(const Node& n, const Graph& g) {
  if (!has_stage(n, Stage::kAdd)) return;
  other_input_ = stage_input(n, Stage::kAdd, kAddOther);
  const ValueInfo* y = g.value(n.outputs[0]);
  const ValueInfo* other = g.value(n.inputs[other_input_]);
  const bool y_u8 = !y || y->dtype == DType::kUint8, other_u8 = !other || other->dtype == DType::kUint8;
  // The unit's own output has the Add's output type (the rewrite checks it).
  p_ = read_stage_qbinary_params(n, g, Stage::kAdd, y_u8, other_u8, y_u8, kQAddReluAttr);
  label_ = n.label();
  active_ = true;
}

kernels::QBinaryParams read_stage_qbinary_params(const Node& n, const Graph& g, Stage s, bool a_u8, bool b_u8, bool y_u8,
                                                 const char* relu_attr) {
  static_assert(kAddSelfScale == 1 && kAddYZero == 6 && kGateMapScale == 1 && kGateYZero == 6,
                "both binary stages: the operand, then the six scales and zero points");
  size_t at[6];
  for (size_t i = 0; i < 6; ++i) at[i] = stage_input(n, s, 1 + i);
  return read_qbinary_params(n, g, at, a_u8, b_u8, y_u8, relu_attr);
}

int64_t QAddAfter::other_stride(const Shape& other, const Shape& y) const {
  if (other == y) return y.empty() ? 1 : y.back();
  const int64_t row = y.empty() ? 1 : y.back();
  if (shape_numel(other) == row && (other.empty() || other.back() == row)) return 0;
  throw Error(label_ + ": the folded Add's other operand " + shape_str(other) + " is neither the output's shape " +
              shape_str(y) + " nor one row of it");
}

std::optional<kernels::ConvQAdd> QAddAfter::in_epilogue(const kernels::QgemmEpilogue& ep, const void* other,
                                                        int64_t ldo) const {
  if (!active_ || p_.mul || ep.out == kernels::QuantOut::kFloat32 || p_.a_u8 != (ep.out == kernels::QuantOut::kUint8) ||
      p_.za != ep.out_zero)
    return std::nullopt;
  return kernels::ConvQAdd{other, ldo, p_};
}

void QAddAfter::apply(const RunContext& rc, void* y, int64_t ldy, const void* other, int64_t ldo, int64_t m0, int64_t m1,
                      int64_t j0, int64_t j1) const {
  if (j1 <= j0) return;
  uint8_t* yb = static_cast<uint8_t*>(y);  // one byte per element on both sides
  const uint8_t* ob = static_cast<const uint8_t*>(other);
  if (j0 == 0 && j1 == ldy && ldo == ldy) {  // whole rows of both, one after another: one call
    rc.kernels.qbinary(yb + m0 * ldy, ob + m0 * ldy, p_, yb + m0 * ldy, (m1 - m0) * ldy);
    return;
  }
  for (int64_t m = m0; m < m1; ++m) {
    uint8_t* row = yb + m * ldy + j0;
    rc.kernels.qbinary(row, ob + m * ldo + j0, p_, row, j1 - j0);
  }
}

}  // namespace optim
