// Attention's quantized scores to quantized weights in one pass: DequantizeLinear(scores) [-> Mul or Div by a float
// scalar constant] [-> Add mask] -> Softmax over the last axis -> QuantizeLinear becomes one internal QSoftmax node.
// Unfused, each of those is a pass over the batch x heads x queries x keys scores (in MiniLM at sequence 128, about
// a sixth of an int8 run); QSoftmax (ops/qsoftmax.cc) does the same float operations in the same order on one row
// at a time, in cache, so its bytes equal the unfused nodes'.
#include <algorithm>

#include "../graph_matcher.h"
#include "qdq_checks.h"
#include "rewrite.h"

namespace optim {
namespace {

constexpr const char* kRewrite = "qdq_softmax";

// Whether Softmax n normalizes the last axis alone (opset 13's axis, or an older one's flattened tail when the
// axis is the last).
bool over_last_axis(const Graph& g, const Node& n) {
  const ValueInfo* x = g.value(n.inputs[0]);
  if (!x || !x->has_shape || x->shape.empty()) return false;
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis = n.attr_i("axis", n.since_version < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  return axis == rank - 1;
}

// The mask operand of Add `add` reading `x`: a float32 value that broadcasts into x's shape without growing it.
std::string mask_operand(const Graph& g, const Node& add, const std::string& x) {
  const std::string mask = other_input(add, x);
  const ValueInfo* xv = g.value(x);
  const ValueInfo* mv = g.value(mask);
  const ValueInfo* yv = g.value(add.outputs[0]);
  if (mask.empty() || !xv || !mv || !yv || mv->dtype != DType::kFloat32 || !xv->has_shape || !mv->has_shape || !yv->has_shape)
    return "";
  if (mv->shape.size() > xv->shape.size() || yv->shape != xv->shape) return "";
  for (size_t i = 0; i < mv->shape.size(); ++i) {
    const int64_t md = mv->shape[mv->shape.size() - 1 - i], xd = xv->shape[xv->shape.size() - 1 - i];
    if (md != 1 && md != xd) return "";
  }
  return mask;
}

// For n a Mul by a float scalar constant (on either side) or a Div by one (x / c only): the scaled operand and the
// constant.
bool scaling(const Graph& g, const Node* n, std::string* x, float* c) {
  if (is_onnx_op(n, "Mul")) return scalar_operand(g, *n, c, x);
  if (!is_onnx_op(n, "Div") || n->inputs.size() != 2 || !float_scalar_constant(g, n->inputs[1], c)) return false;
  *x = n->inputs[0];
  return true;
}

// Whether `value` is made by a DequantizeLinear, directly or through such a scaling.
bool scores_from_dequantize(const Graph& g, const Matcher& m, const std::string& value) {
  const Node* p = m.producer(value);
  std::string x;
  float c = 0.f;
  return is_onnx_op(p, "DequantizeLinear") || (scaling(g, p, &x, &c) && m.produced_by(x, "DequantizeLinear"));
}

}  // namespace

size_t fuse_qdq_softmax(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i)) continue;
    const Node& softmax = g.nodes[i];
    if (!is_onnx_op(&softmax, "Softmax")) continue;
    const Node* q = m.sole_reader(softmax.outputs[0]);
    if (!is_onnx_op(q, "QuantizeLinear") || !is_float_scalar(g, q->inputs[1]) || !is_int8_scalar_or_absent(g, *q, 2) ||
        q->attr_i("saturate", 1) != 1 || q->attr_i("block_size", 0) != 0 || q->attr_i("precision", 0) > 1) {
      ctx.refuse(kRewrite, softmax, "its result is not read by one float32 QuantizeLinear per tensor");
      continue;
    }
    if (!over_last_axis(g, softmax)) {
      ctx.refuse(kRewrite, softmax, "it does not normalize the last axis alone (or its input's shape is unknown)");
      continue;
    }
    // Back from the Softmax: an optional Add of a mask, an optional scaling, then the DequantizeLinear. The Add's
    // scores operand is the one that leads there (a mask can be computed by a Mul too).
    std::string x = softmax.inputs[0];
    const Node* add = m.produced_by(x, "Add");
    std::string mask;
    if (add && m.sole_reader(add->outputs[0]) == &softmax) {
      auto scores = std::find_if(add->inputs.begin(), add->inputs.end(),
                                 [&](const std::string& operand) { return scores_from_dequantize(g, m, operand); });
      if (scores != add->inputs.end()) mask = mask_operand(g, *add, *scores);
      if (mask.empty()) {
        ctx.refuse(kRewrite, softmax, "the Add before it is not of dequantized scores and a mask that fits them");
        continue;
      }
      x = *scores;
    } else {
      add = nullptr;
    }
    const Node* scale = m.producer(x);
    float factor = 1.f;
    if ((is_onnx_op(scale, "Mul") || is_onnx_op(scale, "Div")) && m.sole_reader(scale->outputs[0]) &&
        scale->inputs.size() == 2) {
      if (!scaling(g, scale, &x, &factor)) {
        ctx.refuse(kRewrite, softmax, "the scores are scaled by something other than a float scalar constant");
        continue;
      }
    } else {
      scale = nullptr;
    }
    const Node* dq = m.produced_by(x, "DequantizeLinear");
    if (!dq || !activation_dq_ok(g, *dq)) {
      ctx.refuse(kRewrite, softmax, "its scores do not come from a per-tensor DequantizeLinear of int8/uint8");
      continue;
    }
    // A scalar constant of higher rank (or a mask) could grow the scores on the way; QSoftmax writes x's shape.
    const ValueInfo* scores = g.value(dq->outputs[0]);
    const ValueInfo* normalized = g.value(softmax.inputs[0]);
    if (!scores || !scores->has_shape || !normalized || scores->shape != normalized->shape) {
      ctx.refuse(kRewrite, softmax, "its input's shape is not the dequantized scores' (or is unknown)");
      continue;
    }
    const DType out = dtype_of(g, q->outputs[0]);
    if (out != DType::kUint8 && out != DType::kInt8) continue;
    Node fused;
    fused.name = softmax.name;
    fused.op = "QSoftmax";
    fused.domain = kInternalDomain;
    fused.since_version = 1;
    fused.inputs = {dq->inputs[0], dq->inputs[1], dq->has_input(2) ? dq->inputs[2] : "", mask,
                    q->inputs[1], q->has_input(2) ? q->inputs[2] : ""};
    fused.outputs = {q->outputs[0]};
    if (scale) {
      fused.set_attr_s("scale_op", scale->op);
      fused.set_attr_f("scale", factor);
    }
    // The step label: the nodes in the order they ran (each note goes ahead of the earlier ones).
    for (const Node* n : {add, scale, dq})
      if (n) note_fused_before(fused, n->label());
    note_fused_after(fused, q->label());
    std::vector<const Node*> chain;
    for (const Node* n : {scale, add}) if (n) chain.push_back(n);
    retire_pattern(m, softmax, chain, q, {dq});
    added.push_back(std::move(fused));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
