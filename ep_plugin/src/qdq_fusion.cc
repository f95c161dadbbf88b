#include "qdq_fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "graph_matcher.h"
#include "ops/qgemm.h"

namespace optim {
namespace {

// Every rewrite here assumes scales are positive and finite: with a negative scale a Relu clamps the
// other end of the integer range and MaxPool picks the minimum, and zero or NaN scales have no integer
// form. Such models keep their float units, which compute exactly what ONNX defines.
bool positive_finite(const Tensor& t) {
  if (t.dtype != DType::kFloat32) return false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    if (!(v > 0.f) || !std::isfinite(v)) return false;
  }
  return true;
}

// A positive, finite float32 scalar constant (a per-tensor scale).
bool is_float_scalar(const Graph& g, const std::string& name) {
  const Tensor* t = g.constant(name);
  return t && t->numel() == 1 && positive_finite(*t);
}

bool is_int8_scalar_or_absent(const Graph& g, const Node& q, size_t idx) {
  if (!q.has_input(idx)) return true;
  const Tensor* t = g.constant(q.inputs[idx]);
  return t && t->numel() == 1 && (t->dtype == DType::kUint8 || t->dtype == DType::kInt8);
}

DType dtype_of(const Graph& g, const std::string& v) {
  const ValueInfo* vi = g.value(v);
  return vi ? vi->dtype : DType::kUndefined;
}

// The activation side: DequantizeLinear of a uint8/int8 value, per tensor.
bool activation_dq_ok(const Graph& g, const Node& dq) {
  const DType t = dtype_of(g, dq.inputs[0]);
  return (t == DType::kUint8 || t == DType::kInt8) && is_float_scalar(g, dq.inputs[1]) && is_int8_scalar_or_absent(g, dq, 2) &&
         dq.attr_i("block_size", 0) == 0;
}

// The weight side: DequantizeLinear of a 2-D int8/uint8 constant, per tensor or per output column.
bool weight_dq_ok(const Graph& g, const Node& dq, bool trans_b) {
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
bool conv_weight_dq_ok(const Graph& g, const Node& dq) {
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
bool bias_values(const Graph& g, const Matcher& m, const std::string& name, int64_t n, std::vector<float>* out) {
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

}  // namespace

size_t fuse_qdq_units(Graph& g, const std::vector<std::string>& outputs, std::vector<std::string>* unfused) {
  Matcher m(g, outputs);
  auto refuse = [&](const Node& n, const std::string& why) {
    if (unfused) unfused->push_back(n.label() + ": " + why);
  };
  std::vector<Node> added;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i)) continue;
    const Node& mm = g.nodes[i];
    const bool gemm = mm.op == "Gemm", conv = mm.op == "Conv";
    if ((mm.op != "MatMul" && !gemm && !conv) || !(mm.domain.empty() || mm.domain == "ai.onnx") || mm.inputs.size() < 2) continue;
    if (gemm && (mm.attr_i("transA", 0) != 0 || mm.attr_f("alpha", 1.f) != 1.f || mm.attr_f("beta", 1.f) != 1.f)) {
      refuse(mm, "Gemm with transA or alpha/beta other than 1");
      continue;
    }
    const bool trans_b = gemm && mm.attr_i("transB", 0) != 0;
    const Node* dx = m.produced_by(mm.inputs[0], "DequantizeLinear");
    const Node* dw = m.produced_by(mm.inputs[1], "DequantizeLinear");
    if (!dx || !dw) {
      refuse(mm, "its inputs are not both DequantizeLinear outputs");
      continue;
    }
    if (!activation_dq_ok(g, *dx)) {
      refuse(mm, "input A is not a uint8/int8 tensor dequantized with a constant per-tensor scale and zero point");
      continue;
    }
    // MatMul of two quantized activations (attention's Q x K^T and P x V): an integer unit too, B packed per run.
    auto matrix_rank = [&](const std::string& v) {  // both operands at least 2-D (no vector products)
      const ValueInfo* vi = g.value(v);
      return vi && vi->has_shape && vi->shape.size() >= 2;
    };
    const bool act_act = mm.op == "MatMul" && !g.constant(dw->inputs[0]) && activation_dq_ok(g, *dw) &&
                         matrix_rank(dx->inputs[0]) && matrix_rank(dw->inputs[0]);
    if (!act_act && (conv ? !conv_weight_dq_ok(g, *dw) : !weight_dq_ok(g, *dw, trans_b))) {
      refuse(mm, conv ? "its weights are not a constant 1-D/2-D int8/uint8 kernel dequantized per tensor or per output channel"
                      : "input B is not a constant 2-D int8/uint8 weight dequantized per tensor or per output column");
      continue;
    }
    if (conv && mm.attr_s("auto_pad", "NOTSET") != "NOTSET" && mm.attr_s("auto_pad", "NOTSET") != "VALID" &&
        mm.attr_s("auto_pad", "NOTSET") != "SAME_UPPER" && mm.attr_s("auto_pad", "NOTSET") != "SAME_LOWER") {
      refuse(mm, "auto_pad is not one OptimEP implements");
      continue;
    }
    const Tensor* w = g.constant(dw->inputs[0]);
    const int64_t n = act_act ? -1 : conv ? w->shape[0] : trans_b ? w->shape[0] : w->shape[1];  // -1: no bias

    // Walk forward: [bias Add] [Relu] QuantizeLinear, each the sole reader of the value before it.
    std::vector<float> bias;
    const Node* bias_dq = nullptr;
    std::vector<const Node*> chain;
    std::string value = mm.outputs[0];
    if ((gemm || conv) && mm.has_input(2)) {
      if (!bias_values(g, m, mm.inputs[2], n, &bias)) {
        refuse(mm, "its bias is not a float32 or dequantized int32 constant of one value per output channel");
        continue;
      }
      bias_dq = m.produced_by(mm.inputs[2], "DequantizeLinear");
    }
    const Node* next = m.sole_reader(value);
    if (next && !gemm && !conv && !act_act && next->op == "Add" && bias.empty()) {
      const std::string& other = next->inputs[0] == value ? next->inputs[1] : next->inputs[0];
      if (bias_values(g, m, other, n, &bias)) {
        bias_dq = m.produced_by(other, "DequantizeLinear");
        chain.push_back(next);
        value = next->outputs[0];
        next = m.sole_reader(value);
      }
    }
    bool relu = false;
    if (next && next->op == "Relu") {
      relu = true;
      chain.push_back(next);
      value = next->outputs[0];
      next = m.sole_reader(value);
    }
    if (!next || next->op != "QuantizeLinear") {
      refuse(mm, "its result is not read by exactly one QuantizeLinear (through an optional bias Add and Relu) "
                 "inside the partition");
      continue;
    }
    const DType out_type = dtype_of(g, next->outputs[0]);
    if (!is_float_scalar(g, next->inputs[1]) || !is_int8_scalar_or_absent(g, *next, 2) ||
        (out_type != DType::kUint8 && out_type != DType::kInt8)) {
      refuse(mm, "its QuantizeLinear is not per tensor to uint8/int8 with constant scale and zero point");
      continue;
    }

    Node q;
    q.name = mm.name;  // errors name the user's MatMul/Gemm
    q.op = conv ? "QConv" : act_act ? "QMatMul" : "QGemm";
    q.domain = kInternalDomain;
    q.since_version = 1;
    q.inputs.assign(kQGemmInputCount, "");
    q.inputs[kQGemmX] = dx->inputs[0];
    q.inputs[kQGemmXScale] = dx->inputs[1];
    q.inputs[kQGemmXZero] = dx->has_input(2) ? dx->inputs[2] : "";
    q.inputs[kQGemmW] = dw->inputs[0];
    q.inputs[kQGemmWScale] = dw->inputs[1];
    q.inputs[kQGemmWZero] = dw->has_input(2) ? dw->inputs[2] : "";
    if (!bias.empty()) {
      const std::string bias_name = mm.name + "/optim_bias_f32";
      Tensor bt;
      bt.dtype = DType::kFloat32;
      bt.shape = {static_cast<int64_t>(bias.size())};
      bt.bytes.resize(bias.size() * sizeof(float));
      std::copy(bias.begin(), bias.end(), reinterpret_cast<float*>(bt.bytes.data()));
      g.constants[bias_name] = std::move(bt);
      g.values[bias_name] = ValueInfo{bias_name, DType::kFloat32, true, {static_cast<int64_t>(bias.size())}, true};
      q.inputs[kQGemmBias] = bias_name;
    }
    q.inputs[kQGemmYScale] = next->inputs[1];
    q.inputs[kQGemmYZero] = next->has_input(2) ? next->inputs[2] : "";
    q.outputs = {next->outputs[0]};
    if (conv) q.attrs = mm.attrs;  // kernel_shape, strides, pads, dilations, group, auto_pad
    Attr tb;
    tb.type = ORT_OP_ATTR_INT;
    tb.i = trans_b ? 1 : 0;
    q.attrs["transB"] = tb;
    Attr rl = tb;
    rl.i = relu ? 1 : 0;
    q.attrs["relu"] = rl;

    m.kill(&mm);
    for (const Node* c : chain) m.kill(c);
    m.kill(next);
    m.kill_if_unread(dw);
    if (dx != dw) m.kill_if_unread(dx);  // x x x reads one DequantizeLinear twice
    if (bias_dq) m.kill_if_unread(bias_dq);
    added.push_back(std::move(q));
  }
  if (added.empty()) return 0;
  const size_t fused = added.size();
  commit_rewrites(g, m, added);
  return fused;
}

size_t fold_constant_dequantize(Graph& g, const std::vector<std::string>& outputs) {
  const std::set<std::string> keep(outputs.begin(), outputs.end());
  size_t folded = 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    const bool dq = n.op == "DequantizeLinear" && (n.domain.empty() || n.domain == "ai.onnx");
    const Tensor* q = dq ? g.constant(n.inputs[0]) : nullptr;
    const Tensor* s = dq ? g.constant(n.inputs[1]) : nullptr;
    const Tensor* z = dq && n.has_input(2) ? g.constant(n.inputs[2]) : nullptr;
    const bool foldable = q && s && (!n.has_input(2) || z) && !keep.count(n.outputs[0]) && s->dtype == DType::kFloat32 &&
                          (q->dtype == DType::kInt8 || q->dtype == DType::kUint8 || q->dtype == DType::kInt32) &&
                          (!z || z->dtype == q->dtype) && n.attr_i("block_size", 0) == 0;
    if (!foldable) {
      kept.push_back(std::move(n));
      continue;
    }
    // Per tensor, or per channel along `axis` (scale of that axis' length).
    int64_t channels = 1, inner = 1;
    if (s->numel() != 1) {
      int64_t axis = n.attr_i("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(q->shape.size());
      if (axis < 0 || axis >= static_cast<int64_t>(q->shape.size()) || q->shape[static_cast<size_t>(axis)] != s->numel()) {
        kept.push_back(std::move(n));
        continue;
      }
      channels = s->numel();
      for (size_t d = static_cast<size_t>(axis) + 1; d < q->shape.size(); ++d) inner *= q->shape[d];
    }
    Tensor out;
    out.dtype = DType::kFloat32;
    out.shape = q->shape;
    out.bytes.resize(static_cast<size_t>(q->numel()) * sizeof(float));
    float* o = reinterpret_cast<float*>(out.bytes.data());
    auto at = [](const Tensor& t, int64_t i) -> int64_t {
      if (t.dtype == DType::kUint8) return t.data<uint8_t>()[i];
      if (t.dtype == DType::kInt8) return t.data<int8_t>()[i];
      return t.data<int32_t>()[i];
    };
    for (int64_t i = 0; i < q->numel(); ++i) {
      const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
      o[i] = static_cast<float>(at(*q, i) - (z ? at(*z, c) : 0)) * s->data<float>()[c];
    }
    g.constants[n.outputs[0]] = std::move(out);
    if (ValueInfo* vi = &g.values[n.outputs[0]]) vi->is_constant = true;
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

namespace {

bool same_scalar_constant(const Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  const Tensor* x = g.constant(a);
  const Tensor* y = g.constant(b);
  return x && y && x->dtype == y->dtype && x->numel() == 1 && y->numel() == 1 && x->bytes == y->bytes;
}

// Ops whose result on quantized values equals requantizing their float result when the input and
// output quantization are the same: data movement, and max (monotonic).
bool passes_quantized(const Node& n) {
  static const std::set<std::string> ops = {"MaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return (n.domain.empty() || n.domain == "ai.onnx") && ops.count(n.op) != 0;
}

}  // namespace

size_t keep_quantized_through_data_movement(Graph& g, const std::vector<std::string>& outputs) {
  Matcher m(g, outputs);
  size_t rewired = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (m.dead().count(i)) continue;
    Node& op = g.nodes[i];
    if (!passes_quantized(op) || op.inputs.empty() || op.outputs.size() != 1) continue;
    if (op.op == "MaxPool" && op.since_version < 12) continue;  // quantized MaxPool came with opset 12
    const Node* dq = m.produced_by(op.inputs[0], "DequantizeLinear");
    const Node* q = m.sole_reader(op.outputs[0]);
    if (!dq || !q || q->op != "QuantizeLinear" || !activation_dq_ok(g, *dq)) continue;
    const DType qt = dtype_of(g, dq->inputs[0]);
    if (dtype_of(g, q->outputs[0]) != qt || !same_scalar_constant(g, dq->inputs[1], q->inputs[1])) continue;
    const std::string dz = dq->has_input(2) ? dq->inputs[2] : "", qz = q->has_input(2) ? q->inputs[2] : "";
    if (!(dz.empty() && qz.empty()) && (dz.empty() || qz.empty() || !same_scalar_constant(g, dz, qz))) continue;
    // Run the op on the quantized input, producing the QuantizeLinear's output directly.
    const std::string out = q->outputs[0];
    m.kill(q);
    m.rewire_input(op, 0, dq->inputs[0]);
    op.outputs[0] = out;
    m.kill_if_unread(dq);
    ++rewired;
  }
  if (!rewired) return 0;
  std::vector<Node> none;
  commit_rewrites(g, m, none);
  return rewired;
}

size_t fuse_qdq_adds(Graph& g, const std::vector<std::string>& outputs) {
  Matcher m(g, outputs);
  std::vector<Node> added;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i)) continue;
    const Node& add = g.nodes[i];
    if (add.op != "Add" || !(add.domain.empty() || add.domain == "ai.onnx") || add.inputs.size() != 2) continue;
    const Node* da = m.produced_by(add.inputs[0], "DequantizeLinear");
    const Node* db = m.produced_by(add.inputs[1], "DequantizeLinear");
    if (!da || !db || !activation_dq_ok(g, *da) || !activation_dq_ok(g, *db)) continue;
    std::vector<const Node*> chain;
    const Node* next = m.sole_reader(add.outputs[0]);
    bool relu = false;
    if (next && next->op == "Relu") {
      relu = true;
      chain.push_back(next);
      next = m.sole_reader(next->outputs[0]);
    }
    if (!next || next->op != "QuantizeLinear" || !is_float_scalar(g, next->inputs[1]) || !is_int8_scalar_or_absent(g, *next, 2))
      continue;
    const DType out_type = dtype_of(g, next->outputs[0]);
    if (out_type != DType::kUint8 && out_type != DType::kInt8) continue;
    Node q;
    q.name = add.name;
    q.op = "QAdd";
    q.domain = kInternalDomain;
    q.since_version = 1;
    q.inputs = {da->inputs[0], da->inputs[1], da->has_input(2) ? da->inputs[2] : "",
                db->inputs[0], db->inputs[1], db->has_input(2) ? db->inputs[2] : "",
                next->inputs[1], next->has_input(2) ? next->inputs[2] : ""};
    q.outputs = {next->outputs[0]};
    Attr rl;
    rl.type = ORT_OP_ATTR_INT;
    rl.i = relu ? 1 : 0;
    q.attrs["relu"] = rl;
    m.kill(&add);
    for (const Node* c : chain) m.kill(c);
    m.kill(next);
    m.kill_if_unread(da);
    if (db != da) m.kill_if_unread(db);
    added.push_back(std::move(q));
  }
  if (added.empty()) return 0;
  const size_t fused = added.size();
  commit_rewrites(g, m, added);
  return fused;
}

}  // namespace optim
