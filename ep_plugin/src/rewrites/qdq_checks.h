// What the QDQ rewrites (qdq_units, qdq_adds, quantized_data_movement) check of the DequantizeLinear /
// QuantizeLinear nodes around a unit: per-tensor activations, constant weights per tensor or per channel,
// biases as float or dequantized int32 constants; and the requantization some of them insert.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "../graph_matcher.h"
#include "../ir.h"

namespace optim {

// Removes a matched QDQ pattern once its unit replaces it: the float op, the nodes between it and its
// QuantizeLinear (a bias Add, a Relu), that QuantizeLinear, and each DequantizeLinear that fed it and that nothing
// reads now (null entries and repeats skipped: x x x reads one DequantizeLinear twice).
inline void retire_pattern(Matcher& m, const Node& op, const std::vector<const Node*>& chain, const Node* q,
                           std::initializer_list<const Node*> dequantized) {
  m.kill(&op);
  for (const Node* c : chain) m.kill(c);
  m.kill(q);
  std::vector<const Node*> seen;
  for (const Node* dq : dequantized) {
    if (!dq || std::find(seen.begin(), seen.end(), dq) != seen.end()) continue;
    seen.push_back(dq);
    m.kill_if_unread(dq);
  }
}

// Every rewrite here assumes scales are positive and finite: with a negative scale a Relu clamps the
// other end of the integer range and MaxPool picks the minimum, and zero or NaN scales have no integer
// form. Such models keep their float units, which compute exactly what ONNX defines.
inline bool positive_finite(const Tensor& t) {
  if (t.dtype != DType::kFloat32) return false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    if (!(v > 0.f) || !std::isfinite(v)) return false;
  }
  return true;
}

// A positive, finite float32 scalar constant (a per-tensor scale).
inline bool is_float_scalar(const Graph& g, const std::string& name) {
  const Tensor* t = g.constant(name);
  return t && t->numel() == 1 && positive_finite(*t);
}

inline bool is_int8_scalar_or_absent(const Graph& g, const Node& q, size_t idx) {
  if (!q.has_input(idx)) return true;
  const Tensor* t = g.constant(q.inputs[idx]);
  return t && t->numel() == 1 && (t->dtype == DType::kUint8 || t->dtype == DType::kInt8);
}

inline DType dtype_of(const Graph& g, const std::string& v) {
  const ValueInfo* vi = g.value(v);
  return vi ? vi->dtype : DType::kUndefined;
}

inline bool same_scalar_constant(const Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  const Tensor* x = g.constant(a);
  const Tensor* y = g.constant(b);
  return x && y && x->dtype == y->dtype && x->numel() == 1 && y->numel() == 1 && x->bytes == y->bytes;
}

// Whether DequantizeLinear `dq` reads what QuantizeLinear `q` would write for the same real values: the
// same integer type, scale and zero point (an absent zero point only matches an absent one).
inline bool same_quantization(const Graph& g, const Node& dq, const Node& q) {
  const std::string dz = dq.has_input(2) ? dq.inputs[2] : "", qz = q.has_input(2) ? q.inputs[2] : "";
  return dtype_of(g, dq.inputs[0]) == dtype_of(g, q.outputs[0]) && same_scalar_constant(g, dq.inputs[1], q.inputs[1]) &&
         ((dz.empty() && qz.empty()) || (!dz.empty() && !qz.empty() && same_scalar_constant(g, dz, qz)));
}

// QuantizeLinear(dq's float output) into q's quantization, as a new node writing a new value shaped as dq's
// output (qdq_lut turns the DQ -> Q pair into a 256-byte table). The caller adds the node to the graph.
inline Node requantize_like(Graph& g, const Node& dq, const Node& q) {
  std::string out = dq.outputs[0] + "/requantized";
  for (int k = 1; g.values.count(out) || g.constants.count(out); ++k) out = dq.outputs[0] + "/requantized_" + std::to_string(k);
  ValueInfo vi;
  vi.name = out;
  vi.dtype = dtype_of(g, q.outputs[0]);
  if (const ValueInfo* src = g.value(dq.outputs[0])) {
    vi.has_shape = src->has_shape;
    vi.shape = src->shape;
  }
  g.values[out] = vi;
  Node rq;
  rq.name = out + "/QuantizeLinear";
  rq.op = "QuantizeLinear";
  rq.since_version = q.since_version;
  rq.inputs = {dq.outputs[0], q.inputs[1]};
  if (q.has_input(2)) rq.inputs.push_back(q.inputs[2]);
  rq.outputs = {out};
  rq.attrs = q.attrs;
  return rq;
}

// The activation side: DequantizeLinear of a uint8/int8 value, per tensor.
inline bool activation_dq_ok(const Graph& g, const Node& dq) {
  const DType t = dtype_of(g, dq.inputs[0]);
  return (t == DType::kUint8 || t == DType::kInt8) && is_float_scalar(g, dq.inputs[1]) && is_int8_scalar_or_absent(g, dq, 2) &&
         dq.attr_i("block_size", 0) == 0;
}

// The weight side: DequantizeLinear of a 2-D int8/uint8 constant, per tensor or per output column.
inline bool weight_dq_ok(const Graph& g, const Node& dq, bool trans_b) {
  const Tensor* w = g.constant(dq.inputs[0]);
  if (!w || w->shape.size() != 2 || (w->dtype != DType::kInt8 && w->dtype != DType::kUint8)) return false;
  if (dq.attr_i("block_size", 0) != 0) return false;
  const Tensor* s = g.constant(dq.inputs[1]);
  if (!s || !positive_finite(*s)) return false;
  const int64_t n = trans_b ? w->shape[0] : w->shape[1];
  if (s->numel() != 1) {
    int64_t axis = dq.attr_i("axis", 1);
    if (axis < 0) axis += 2;
    if (s->shape.size() != 1 || s->numel() != n || axis != (trans_b ? 0 : 1)) return false;
  }
  if (dq.has_input(2)) {
    const Tensor* z = g.constant(dq.inputs[2]);
    if (!z || z->dtype != w->dtype || z->numel() != s->numel()) return false;
  }
  return true;
}

// Conv weights: DequantizeLinear of a constant int8/uint8 [Cout, Cin/g, k...] tensor, per tensor or per
// output channel (axis 0).
inline bool conv_weight_dq_ok(const Graph& g, const Node& dq) {
  const Tensor* w = g.constant(dq.inputs[0]);
  if (!w || (w->shape.size() != 3 && w->shape.size() != 4) || (w->dtype != DType::kInt8 && w->dtype != DType::kUint8))
    return false;
  if (dq.attr_i("block_size", 0) != 0) return false;
  const Tensor* s = g.constant(dq.inputs[1]);
  if (!s || !positive_finite(*s)) return false;
  if (s->numel() != 1) {
    int64_t axis = dq.attr_i("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(w->shape.size());
    if (s->shape.size() != 1 || s->numel() != w->shape[0] || axis != 0) return false;
  }
  if (dq.has_input(2)) {
    const Tensor* z = g.constant(dq.inputs[2]);
    if (!z || z->dtype != w->dtype || z->numel() != s->numel()) return false;
  }
  return true;
}

// A bias (Gemm's C or the Add after a MatMul) as float32 constants of N values (or one), read
// either from a float constant or through a DequantizeLinear of an int32 constant.
inline bool bias_values(const Graph& g, const Matcher& m, const std::string& name, int64_t n, std::vector<float>* out) {
  auto fits = [n](const Tensor& t) {
    return t.numel() == 1 || (t.numel() == n && t.shape.back() == n && shape_numel(t.shape) == n);
  };
  if (const Tensor* t = g.constant(name)) {
    if (t->dtype != DType::kFloat32 || !fits(*t)) return false;
    out->assign(t->data<float>(), t->data<float>() + t->numel());
    return true;
  }
  const Node* dq = m.produced_by(name, "DequantizeLinear");
  if (!dq) return false;
  const Tensor* q = g.constant(dq->inputs[0]);
  const Tensor* s = g.constant(dq->inputs[1]);
  if (!q || !s || q->dtype != DType::kInt32 || !fits(*q) || s->dtype != DType::kFloat32) return false;
  if (s->numel() != 1 && s->numel() != q->numel()) return false;
  const Tensor* z = dq->has_input(2) ? g.constant(dq->inputs[2]) : nullptr;
  if (dq->has_input(2) && (!z || z->dtype != DType::kInt32 || z->numel() != s->numel())) return false;
  out->resize(static_cast<size_t>(q->numel()));
  for (int64_t i = 0; i < q->numel(); ++i) {
    const int64_t si = s->numel() == 1 ? 0 : i;
    const int64_t zp = z ? z->data<int32_t>()[si] : 0;
    (*out)[static_cast<size_t>(i)] = static_cast<float>(static_cast<int64_t>(q->data<int32_t>()[i]) - zp) * s->data<float>()[si];
  }
  return true;
}

}  // namespace optim
