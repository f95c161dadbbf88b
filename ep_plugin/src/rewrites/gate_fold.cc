// Folds a squeeze-excite's QMul into the 1x1 NhwcQConv that alone reads its output (ops/gate_before.h): the unit
// reads the QMul's map operand [N, H, W, C] as its input and takes the gate [N or 1, 1, 1, C] and the QMul's
// scales and zero points as its stage Stage::kGate (ops/unit_stages.h), the QMul's Relu as attribute gated_relu.
// Everything uint8 but the gate (uint8 or int8). Runs after the depthwise blocks (a gated unit is never one).
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_common.h"
#include "../ops/gate_before.h"
#include "../ops/qconv_block.h"

namespace optim {

namespace {

// Whether `map` has the QMul's output shape (unknown dims where it has them: the batch) and `gate` is one row of
// its channels per image or one for all (the broadcast then says which; the unit checks again at run time).
bool gate_shapes(const Graph& g, const std::string& map, const std::string& gate, const std::string& product) {
  const ValueInfo* m = g.value(map);
  const ValueInfo* s = g.value(gate);
  const ValueInfo* p = g.value(product);
  if (!m || !s || !p || !m->has_shape || !s->has_shape || !p->has_shape || m->shape.size() != 4 || s->shape.size() != 4)
    return false;
  const Shape& ms = m->shape;
  const Shape& ss = s->shape;
  return ms == p->shape && ms[3] > 0 && ss[1] == 1 && ss[2] == 1 && ss[3] == ms[3] && (ss[0] == 1 || ss[0] == ms[0]) &&
         ms[1] != 1 && ms[2] != 1;
}

}  // namespace

size_t fold_gates_into_units(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& unit : g.nodes) {
    if (!is_internal_op(&unit, "NhwcQConv") || is_qconv_block(unit) || has_stage(unit, Stage::kGate)) continue;
    Node* mul = const_cast<Node*>(m.producer(unit.inputs[kQGemmX]));
    if (!is_internal_op(mul, "QMul") || m.sole_reader(mul->outputs[0]) != &unit) continue;
    const Tensor* w = g.constant(unit.inputs[kQGemmW]);
    if (!w || w->shape.size() != 4 || !ConvGeometry(unit, w->shape).is_pointwise()) continue;
    // Which operand is the map: the one of the unit's input shape, the other one row of channels.
    size_t map = kQBinaryInputCount;
    for (size_t side : {size_t{kQBinaryA}, size_t{kQBinaryB}})
      if (gate_shapes(g, mul->inputs[side], mul->inputs[side == kQBinaryA ? kQBinaryB : kQBinaryA], mul->outputs[0])) map = side;
    if (map == kQBinaryInputCount) {
      ctx.refuse("gate_fold", *mul, "its operands are not a map and one row of its channels per image");
      continue;
    }
    const size_t gate = map == kQBinaryA ? kQBinaryB : kQBinaryA;
    if (!has_dtype(g, mul->inputs[map], DType::kUint8) || !has_dtype(g, mul->outputs[0], DType::kUint8) ||
        !(has_dtype(g, mul->inputs[gate], DType::kUint8) || has_dtype(g, mul->inputs[gate], DType::kInt8))) {
      ctx.refuse("gate_fold", *mul, "its map or result is not uint8");
      continue;
    }
    const size_t at_map = map == kQBinaryA ? kQBinaryAScale : kQBinaryBScale;
    const size_t at_gate = gate == kQBinaryA ? kQBinaryAScale : kQBinaryBScale;
    const size_t first = add_stage(unit, Stage::kGate, {"", mul->inputs[at_map], mul->inputs[at_map + 1], mul->inputs[at_gate],
                                                        mul->inputs[at_gate + 1], mul->inputs[kQBinaryYScale],
                                                        mul->inputs[kQBinaryYZero]});
    m.rewire_input(unit, first + kGateValue, mul->inputs[gate]);
    m.rewire_input(unit, kQGemmX, mul->inputs[map]);
    unit.set_attr_i(kGatedAttr, mul->attr_i("relu", 0));
    note_fused_before(unit, mul->label());
    m.kill(mul);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
