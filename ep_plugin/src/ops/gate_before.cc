// A squeeze-excite QMul run on the rows a 1x1 unit reads (gate_before.h).
#include "gate_before.h"

namespace optim {

GateBefore::GateBefore(const Node& n, const Graph& g) {
  if (!has_stage(n, Stage::kGate)) return;
  gate_input_ = stage_input(n, Stage::kGate, kGateValue);
  p_ = read_stage_qbinary_params(n, g, Stage::kGate, is_u8(g, n.inputs[kQGemmX]), is_u8(g, n.inputs[gate_input_]), true,
                                 kGatedAttr);
  p_.mul = true;
  label_ = n.label();
  active_ = true;
}

int64_t GateBefore::gate_stride(const Shape& gate, const Shape& x) const {
  const int64_t c = x.empty() ? 1 : x.back();
  const bool row = gate.size() == x.size() && gate.size() == 4 && gate[1] == 1 && gate[2] == 1 && gate[3] == c;
  if (row && gate[0] == x[0]) return c;
  if (row && gate[0] == 1) return 0;
  throw Error(label_ + ": its folded gate " + shape_str(gate) + " is not one row of channels per image of " + shape_str(x));
}

void GateBefore::apply(const RunContext& rc, const uint8_t* x, const uint8_t* gate_rows, int64_t rows, int64_t channels,
                       uint8_t* dst) const {
  rc.kernels.qbinary(x, gate_rows, p_, dst, rows * channels);
}

}  // namespace optim
