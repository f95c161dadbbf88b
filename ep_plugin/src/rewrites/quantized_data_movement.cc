// DequantizeLinear -> MaxPool / Reshape / Flatten / Squeeze / Unsqueeze / Identity / Transpose / Slice /
// Gather / Expand / Tile / nearest Resize -> QuantizeLinear with the same scale and zero point on both sides becomes the op alone on the quantized
// tensor: equal results (these ops move or pick values), without the two conversions. A nearest Resize
// between different quantizations picks requantized bytes instead: Q2(pick(DQ1(x))) == pick(Q2(DQ1(x)))
// element by element, and qdq_lut turns the Q2(DQ1(.)) placed before it (on the smaller side when
// upsampling, as decoders do) into a 256-byte table. A linear Resize between per-tensor Q/DQ becomes QResize
// (ops/resize.cc), which computes the float ops between the pair from the bytes.
#include "rewrite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "../graph_matcher.h"
#include "../ops/qgemm.h"
#include "qdq_checks.h"

namespace optim {

namespace {

// Ops whose result on quantized values equals requantizing their float result when the input and
// output quantization are the same: data movement, and max (monotonic); and Resize (linear: see to_qresize).
bool passes_quantized(const Node& n) {
  static const std::set<std::string> ops = {"MaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                                            "Transpose", "Slice", "Gather", "Expand", "Tile", "Resize"};
  return (n.domain.empty() || n.domain == "ai.onnx") && ops.count(n.op) != 0;
}

// A nearest Resize picks whole values, so any per-element map (a requantization) commutes with it.
bool picks_values(const Node& n) { return n.op == "Resize" && n.attr_s("mode", "nearest") == "nearest"; }

bool q_per_tensor(const Graph& g, const Node& q) {
  return is_float_scalar(g, q.inputs[1]) && is_int8_scalar_or_absent(g, q, 2) && q.attr_i("block_size", 0) == 0;
}

float scalar_f(const Graph& g, const std::string& v) { return g.constant(v)->data<float>()[0]; }
int64_t zero_point(const Graph& g, const Node& n, size_t idx) {
  if (!n.has_input(idx)) return 0;
  const Tensor* t = g.constant(n.inputs[idx]);
  return t->dtype == DType::kUint8 ? t->data<uint8_t>()[0] : t->data<int8_t>()[0];
}

// A linear Resize mixes neighbours, so it cannot just move bytes: it becomes QResize, which dequantizes its
// four sources, blends them in float32 as ONNX Runtime's Resize does and quantizes as QuantizeLinear does
// (exactly the float ops between the Q/DQ pair), reading and writing bytes.
void to_qresize(const Graph& g, const Node& dq, const Node& q, Node& op) {
  auto set_f = [&op](const char* k, float v) { Attr& a = op.attrs[k]; a.type = ORT_OP_ATTR_FLOAT; a.f = v; };
  auto set_i = [&op](const char* k, int64_t v) { Attr& a = op.attrs[k]; a.type = ORT_OP_ATTR_INT; a.i = v; };
  set_f("x_scale", scalar_f(g, dq.inputs[1]));
  set_i("x_zero_point", zero_point(g, dq, 2));
  set_f("y_scale", scalar_f(g, q.inputs[1]));
  set_i("y_zero_point", zero_point(g, q, 2));
  op.op = "QResize";  // keeps its opset: it decides how scales / sizes are read
  op.domain = kInternalDomain;
}

}  // namespace

size_t keep_quantized_through_data_movement(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  size_t rewired = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (m.dead().count(i)) continue;
    Node& op = g.nodes[i];
    if (!passes_quantized(op) || op.inputs.empty() || op.outputs.size() != 1) continue;
    if (op.op == "MaxPool" && op.since_version < 12) continue;  // quantized MaxPool came with opset 12
    const Node* dq = m.produced_by(op.inputs[0], "DequantizeLinear");
    const Node* q = m.sole_reader(op.outputs[0]);
    if (!dq || !q || q->op != "QuantizeLinear" || !activation_dq_ok(g, *dq)) continue;
    const bool linear = op.op == "Resize" && !picks_values(op);
    if (linear && !q_per_tensor(g, *q)) {
      ctx.refuse("quantized_data_movement", op, "its QuantizeLinear is not per tensor with a constant scale");
      continue;
    }
    const bool same = !linear && same_quantization(g, *dq, *q);
    if (!linear && !same && !(picks_values(op) && q_per_tensor(g, *q))) {
      ctx.refuse("quantized_data_movement", op, "its input and output are quantized differently");
      continue;
    }
    if (linear) to_qresize(g, *dq, *q, op);
    // Run the op on the quantized input (requantized first where a pick's quantization differs; QResize takes
    // both in), producing the QuantizeLinear's output directly.
    const std::string out = q->outputs[0];
    if (same || linear) {
      m.rewire_input(op, 0, dq->inputs[0]);
      m.kill_if_unread(dq);
    } else {  // the added QuantizeLinear reads dq's output (the matcher does not count added nodes)
      added.push_back(requantize_like(g, *dq, *q));
      m.rewire_input(op, 0, added.back().outputs[0]);
    }
    m.kill(q);
    op.outputs[0] = out;
    ++rewired;
  }
  if (!rewired) return 0;
  commit_rewrites(g, m, added);
  return rewired;
}

}  // namespace optim
