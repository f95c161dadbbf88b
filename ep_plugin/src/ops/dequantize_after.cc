// A DequantizeLinear and bias Add run on each tile of the QGemm before them (dequantize_after.h).
#include "dequantize_after.h"

namespace optim {

DequantizeAfter::DequantizeAfter(const Node& n, const Graph& g, int64_t columns) : columns_(columns) {
  if (!has_stage(n, Stage::kDequantize)) return;
  const Tensor* s = g.constant(stage_value(n, Stage::kDequantize, kDqScale));
  if (!s || s->dtype != DType::kFloat32 || s->numel() != 1) throw Error(n.label() + ": its folded dequantization scale is not a float32 scalar");
  scale_ = s->data<float>()[0];
  if (const std::string& zero = stage_value(n, Stage::kDequantize, kDqZero); !zero.empty()) {
    const Tensor* z = g.constant(zero);
    if (!z || z->dtype != DType::kUint8 || z->numel() != 1) throw Error(n.label() + ": its folded dequantization zero point is not a uint8 scalar");
    zero_ = z->data<uint8_t>()[0];
  }
  if (const std::string& bias = stage_value(n, Stage::kDequantize, kDqBias); !bias.empty()) {
    const Tensor* b = g.constant(bias);
    if (!b || b->dtype != DType::kFloat32 || b->numel() != columns)
      throw Error(n.label() + ": its folded bias is not " + std::to_string(columns) + " float32 constants");
    bias_.assign(b->data<float>(), b->data<float>() + columns);
  }
  if (n.has_attr(kThenGelu)) {
    gelu_ = true;
    gelu_op_ = gelu_op(n.attr_s(kThenGelu, "none"));
  }
  if (has_stage(n, Stage::kRequantize)) {
    q_scale_ = float_scalar(g, stage_value(n, Stage::kRequantize, kRqScale), "the folded QuantizeLinear's scale");
    q_zero_ = zero_point(g, stage_value(n, Stage::kRequantize, kRqZero));
    const ValueInfo* y = g.value(n.outputs[0]);
    if (!y || (y->dtype != DType::kUint8 && y->dtype != DType::kInt8)) throw Error(n.label() + ": its requantized output is not uint8/int8");
    to_u8_ = y->dtype == DType::kUint8;
    requantize_ = true;
  }
  active_ = true;
}

void DequantizeAfter::row(const kernels::KernelTable& kt, const uint8_t* q, int64_t j0, int64_t n, float* v,
                          uint8_t* requantized) const {
  kt.dequantize(q, true, zero_, scale_, v, n);
  if (!bias_.empty()) {
    const float* b = bias_.data() + j0;
    for (int64_t j = 0; j < n; ++j) v[j] = v[j] + b[j];  // Add's one rounding, whatever the vector width
  }
  if (gelu_) kt.unary(gelu_op_, v, v, n);
  if (requantize_) kt.quantize(v, q_scale_, q_zero_, to_u8_, requantized, n);
}

void DequantizeAfter::prepare(const kernels::KernelTable& kt) {
  table_.clear();
  if (!requantize_ || columns_ > kMaxTableColumns) return;
  const int64_t n = columns_;
  std::vector<uint8_t> q(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  std::vector<float> v(static_cast<size_t>(n));
  table_.resize(static_cast<size_t>(n * 256));
  for (int code = 0; code < 256; ++code) {  // a whole row of `code` bytes through the row path
    std::fill(q.begin(), q.end(), static_cast<uint8_t>(code));
    row(kt, q.data(), 0, n, v.data(), out.data());
    for (int64_t j = 0; j < n; ++j) table_[static_cast<size_t>(j * 256 + code)] = out[j];
  }
}

void DequantizeAfter::apply(const RunContext& rc, const uint8_t* q, void* y, int64_t ld, int64_t m0, int64_t m1,
                            int64_t j0, int64_t j1) const {
  if (j1 <= j0) return;
  if (!table_.empty()) {
    const uint8_t* t = table_.data();
    for (int64_t m = m0; m < m1; ++m) {
      const uint8_t* __restrict src = q + m * ld;
      uint8_t* __restrict dst = static_cast<uint8_t*>(y) + m * ld;
      for (int64_t j = j0; j < j1; ++j) dst[j] = t[j * 256 + src[j]];
    }
    return;
  }
  thread_local std::vector<float> buffer;  // the float row when the output is requantized
  if (requantize_ && buffer.size() < static_cast<size_t>(j1 - j0)) buffer.resize(static_cast<size_t>(j1 - j0));
  for (int64_t m = m0; m < m1; ++m) {
    float* v = requantize_ ? buffer.data() : static_cast<float*>(y) + m * ld + j0;  // columns [j0, j1)
    row(rc.kernels, q + m * ld + j0, j0, j1 - j0, v, requantize_ ? static_cast<uint8_t*>(y) + m * ld + j0 : nullptr);
  }
}

}  // namespace optim
