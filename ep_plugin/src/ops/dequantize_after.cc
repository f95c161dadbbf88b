// A DequantizeLinear and bias Add run on each tile of the QGemm before them (dequantize_after.h).
#include "dequantize_after.h"

namespace optim {

DequantizeAfter::DequantizeAfter(const Node& n, const Graph& g, int64_t columns) {
  if (!n.attr_i(kDequantizedOutput, 0)) return;
  if (n.inputs.size() < kDqAfterEnd) throw Error(n.label() + ": its folded DequantizeLinear lacks its scale or zero point");
  const Tensor* s = g.constant(n.inputs[kDqScale]);
  if (!s || s->dtype != DType::kFloat32 || s->numel() != 1) throw Error(n.label() + ": its folded dequantization scale is not a float32 scalar");
  scale_ = s->data<float>()[0];
  if (!n.inputs[kDqZero].empty()) {
    const Tensor* z = g.constant(n.inputs[kDqZero]);
    if (!z || z->dtype != DType::kUint8 || z->numel() != 1) throw Error(n.label() + ": its folded dequantization zero point is not a uint8 scalar");
    zero_ = z->data<uint8_t>()[0];
  }
  if (!n.inputs[kDqBias].empty()) {
    const Tensor* b = g.constant(n.inputs[kDqBias]);
    if (!b || b->dtype != DType::kFloat32 || b->numel() != columns)
      throw Error(n.label() + ": its folded bias is not " + std::to_string(columns) + " float32 constants");
    bias_.assign(b->data<float>(), b->data<float>() + columns);
  }
  active_ = true;
}

void DequantizeAfter::apply(const RunContext& rc, const uint8_t* q, float* y, int64_t ld, int64_t m0, int64_t m1,
                            int64_t j0, int64_t j1) const {
  if (j1 <= j0) return;
  for (int64_t m = m0; m < m1; ++m) {
    float* row = y + m * ld;
    rc.kernels.dequantize(q + m * ld + j0, true, zero_, scale_, row + j0, j1 - j0);
    if (bias_.empty()) continue;
    const float* b = bias_.data();
    for (int64_t j = j0; j < j1; ++j) row[j] = row[j] + b[j];  // Add's one rounding, whatever the vector width
  }
}

}  // namespace optim
