// A squeeze-excite's QMul folded into the 1x1 NhwcQConv that alone reads its output, by rewrites/gate_fold.cc:
// QMul(map [N, H, W, C], gate [N or 1, 1, 1, C]) -> projection. The unit reads the map and gates each block of
// its rows as it takes them (the qbinary kernel: the QMul's float operations in their order, so the bytes equal
// the pair apart), so the gated map, as large as the expanded one, is never stored and read again.
#pragma once

#include "qconv_block.h"

namespace optim {

// Inputs of a gated unit after the block's (unused by a gated unit, which is never a block): the gate, then the
// QMul's scales and zero points of the map (operand a), the gate (b) and its result. Attribute kGatedAttr marks
// the fold and carries the QMul's Relu.
enum GateBeforeInput : size_t {
  kGate = kQBlockEnd, kGateMapScale, kGateMapZero, kGateScale, kGateZero, kGateYScale, kGateYZero, kGateEnd
};
constexpr const char* kGatedAttr = "gated_relu";

class GateBefore {
 public:
  GateBefore() = default;
  // Inactive when n has no folded QMul.
  GateBefore(const Node& n, const Graph& g);
  explicit operator bool() const { return active_; }
  // The gate's row stride in bytes for map x: C when each image has its own gate row, 0 when all share one.
  int64_t gate_stride(const Shape& gate, const Shape& x) const;
  // `rows` rows of `channels` map bytes at x gated by one gate row into dst (the same layout). gate_rows holds
  // that gate row repeated for at least `rows` rows (one kernel call for all of them).
  void apply(const RunContext& rc, const uint8_t* x, const uint8_t* gate_rows, int64_t rows, int64_t channels,
             uint8_t* dst) const;

 private:
  bool active_ = false;
  kernels::QBinaryParams p_;
  std::string label_;
};

}  // namespace optim
