// A squeeze-excite's QMul folded into the 1x1 NhwcQConv that alone reads its output, by rewrites/gate_fold.cc:
// QMul(map [N, H, W, C], gate [N or 1, 1, 1, C]) -> projection. The unit reads the map and gates each block of
// its rows as it takes them (the qbinary kernel: the QMul's float operations in their order, so the bytes equal
// the pair apart), so the gated map, as large as the expanded one, is never stored and read again.
#pragma once

#include "qadd_after.h"

namespace optim {

// The unit's inputs for it: stage Stage::kGate (unit_stages.h), the gate then the QMul's scales and zero points of
// the map (operand a), the gate (b) and its result. Attribute kGatedAttr carries the QMul's Relu.
constexpr const char* kGatedAttr = "gated_relu";

class GateBefore {
 public:
  GateBefore() = default;
  // Inactive when n has no folded QMul.
  GateBefore(const Node& n, const Graph& g);
  explicit operator bool() const { return active_; }
  // Where the gate lies in the node's inputs.
  size_t gate_input() const { return gate_input_; }
  // The gate's row stride in bytes for map x: C when each image has its own gate row, 0 when all share one.
  int64_t gate_stride(const Shape& gate, const Shape& x) const;
  // `rows` rows of `channels` map bytes at x gated by one gate row into dst (the same layout). gate_rows holds
  // that gate row repeated for at least `rows` rows (one kernel call for all of them).
  void apply(const RunContext& rc, const uint8_t* x, const uint8_t* gate_rows, int64_t rows, int64_t channels,
             uint8_t* dst) const;

 private:
  bool active_ = false;
  size_t gate_input_ = 0;
  kernels::QBinaryParams p_;
  std::string label_;
};

}  // namespace optim
