// A QLut (a quantized element-wise region as a 256-byte table, qlut.cc) folded into the integer unit (QGemm,
// NhwcQConv) that alone makes its input, by rewrites/lut_fold.cc: the activation after a convolution or a
// Linear layer (SiLU, HardSwish, GELU). The unit quantizes its sums as before (and runs its folded QAdd, if
// any), then looks each byte of the finished tile up while it is in cache: the bytes of the pair kept apart,
// without writing and reading the unit's output again.
#pragma once

#include "op.h"

namespace optim {

// The attribute holding the table (256 ints, one per byte the unit makes, in the order of its values).
constexpr const char* kLutAfterAttr = "then_lut";

class LutAfter {
 public:
  LutAfter() = default;
  // Inactive when n has no folded QLut; signed: the unit makes int8 (the table is indexed at x + 128).
  LutAfter(const Node& n, bool signed_output);
  explicit operator bool() const { return active_; }
  // Rows [m0, m1), columns [j0, j1) of y (row stride ldy), in place.
  void apply(const RunContext& rc, void* y, int64_t ldy, int64_t m0, int64_t m1, int64_t j0, int64_t j1) const;

 private:
  bool active_ = false;
  uint8_t flip_ = 0;
  uint8_t table_[256] = {};
};

}  // namespace optim
