// Folds the DequantizeLinear that alone reads a QGemm's uint8 output, and the Add of a constant bias row that
// alone reads that (transformers quantized MatMul-only: QGemm -> DequantizeLinear -> Add(bias) -> float ops),
// into the QGemm (ops/dequantize_after.h): stage Stage::kDequantize (ops/unit_stages.h), and the last folded
// node's float output as its own. Then the Gelu that alone reads that (attribute then_gelu) and the per-tensor
// QuantizeLinear that alone reads the Gelu (stage Stage::kRequantize): the FFN's middle, from one quantized MatMul to the next, in one step. Runs after the QAdd
// folds (a unit has one or the other).
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/dequantize_after.h"

namespace optim {

namespace {

// A Gelu that alone reads the unit's float output, then a QuantizeLinear (one constant scale and zero point) that
// alone reads the Gelu's: folded in, the unit's output becomes the last one's.
void fold_gelu_and_quantize(Graph& g, Matcher& m, Node& unit, std::string* label) {
  const Node* gelu = m.sole_reader(unit.outputs[0]);
  const std::string approximate = gelu ? gelu->attr_s("approximate", "none") : "";
  if (!is_onnx_op(gelu, "Gelu") || gelu->inputs[0] != unit.outputs[0] || (approximate != "none" && approximate != "tanh")) return;
  unit.set_attr_s(kThenGelu, approximate);
  *label += " + " + gelu->label();
  unit.outputs[0] = gelu->outputs[0];
  m.kill(gelu);
  const Node* q = m.sole_reader(unit.outputs[0]);
  if (!is_onnx_op(q, "QuantizeLinear") || q->inputs[0] != unit.outputs[0] || q->inputs.size() < 2) return;
  const Tensor* scale = g.constant(q->inputs[1]);
  const Tensor* zero = q->has_input(2) ? g.constant(q->inputs[2]) : nullptr;
  const ValueInfo* y = g.value(q->outputs[0]);
  if (!scale || scale->dtype != DType::kFloat32 || scale->numel() != 1 || !zero || zero->numel() != 1 || !y ||
      (y->dtype != DType::kUint8 && y->dtype != DType::kInt8) || zero->dtype != y->dtype || q->attr_i("saturate", 1) != 1)
    return;
  add_stage(unit, Stage::kRequantize, {q->inputs[1], q->inputs[2]});
  *label += " + " + q->label();
  unit.outputs[0] = q->outputs[0];
  m.kill(q);
}

}  // namespace

size_t fold_dequantize_into_gemms(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& unit : g.nodes) {
    if (!is_internal_op(&unit, "QGemm") || !unit_stages(unit).empty() || unit.outputs.empty()) continue;
    const ValueInfo* own = g.value(unit.outputs[0]);
    const Node* dq = m.sole_reader(unit.outputs[0]);
    if (!own || own->dtype != DType::kUint8 || !is_onnx_op(dq, "DequantizeLinear") || dq->inputs[0] != unit.outputs[0]) continue;
    const Tensor* scale = g.constant(dq->inputs[1]);
    const Tensor* zero = dq->has_input(2) ? g.constant(dq->inputs[2]) : nullptr;
    if (!scale || scale->dtype != DType::kFloat32 || scale->numel() != 1 || (dq->has_input(2) && (!zero || zero->numel() != 1))) {
      ctx.refuse("dequantize_fold", *dq, "it is not per tensor with constant scale and zero point");
      continue;
    }
    const Tensor* w = g.constant(unit.inputs[kQGemmW]);
    const int64_t n = w && w->shape.size() == 2 ? (unit.attr_i("transB", 0) ? w->shape[0] : w->shape[1]) : -1;
    // The bias Add after it, when it alone reads the dequantized values and adds a constant row.
    const Node* add = m.sole_reader(dq->outputs[0]);
    const size_t rank = own->has_shape ? own->shape.size() : 0;
    const std::string bias = is_onnx_op(add, "Add") ? column_bias(g, *add, dq->outputs[0], n, rank) : "";
    add_stage(unit, Stage::kDequantize, {dq->inputs[1], dq->has_input(2) ? dq->inputs[2] : "", bias});
    std::string label = dq->label();
    unit.outputs[0] = dq->outputs[0];
    m.kill(dq);
    if (!bias.empty()) {
      label += " + " + add->label();
      unit.outputs[0] = add->outputs[0];
      m.kill(add);
    }
    fold_gelu_and_quantize(g, m, unit, &label);
    note_fused_after(unit, label);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
