// A QLut run on each tile of the unit that makes its input (lut_after.h).
#include "lut_after.h"

namespace optim {

LutAfter::LutAfter(const Node& n, bool signed_output) {
  if (!n.has_attr(kLutAfterAttr)) return;
  const std::vector<int64_t> t = n.attr_ints(kLutAfterAttr);
  if (t.size() != 256) throw Error(n.label() + ": its folded lookup table has " + std::to_string(t.size()) + " entries, not 256");
  for (size_t i = 0; i < 256; ++i) {
    if (t[i] < 0 || t[i] > 255) throw Error(n.label() + ": its folded lookup table holds a value that is not a byte");
    table_[i] = static_cast<uint8_t>(t[i]);
  }
  flip_ = signed_output ? 0x80 : 0;
  active_ = true;
}

void LutAfter::apply(const RunContext& rc, void* y, int64_t ldy, int64_t m0, int64_t m1, int64_t j0, int64_t j1) const {
  if (j1 <= j0) return;
  uint8_t* yb = static_cast<uint8_t*>(y);  // one byte per element
  if (j0 == 0 && j1 == ldy) {  // whole rows, one after another: one call
    rc.kernels.lut8(yb + m0 * ldy, flip_, table_, yb + m0 * ldy, (m1 - m0) * ldy);
    return;
  }
  for (int64_t m = m0; m < m1; ++m) rc.kernels.lut8(yb + m * ldy + j0, flip_, table_, yb + m * ldy + j0, j1 - j0);
}

}  // namespace optim
