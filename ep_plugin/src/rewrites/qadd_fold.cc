// Folds a QAdd into the integer unit (QGemm, NhwcQConv) that makes one of its operands, when the Add alone
// reads that output (ops/qadd_after.h): the unit takes the other operand and the Add's scales and zero points
// as its stage Stage::kAdd (ops/unit_stages.h), the Add's Relu as attribute then_add_relu, and the Add's output as its own. The
// other operand has the output's shape (a residual) or is one row of its last dim (a bias Add after a MatMul's
// quantization). Runs after channels_last, whose NhwcQConv units and channels-last Adds it pairs.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/qadd_after.h"

namespace optim {

namespace {

bool is_unit(const Node* n) { return is_internal_op(n, "QGemm") || is_internal_op(n, "NhwcQConv"); }

// Why `other` cannot ride along with output `y` of a unit ("" when it can): it must have y's shape (dims equal
// where known, unknown at the same places) or be one row of y's last dim.
std::string shape_problem(const Graph& g, const std::string& other, const std::string& y) {
  const ValueInfo* o = g.value(other);
  const ValueInfo* v = g.value(y);
  if (!o || !v || !o->has_shape || !v->has_shape || v->shape.empty()) return "the shapes of its operands are not known";
  const Shape& os = o->shape;
  const Shape& ys = v->shape;
  const int64_t row = ys.back();
  bool ones = row > 0 && !os.empty() && os.back() == row;
  for (size_t i = 0; i + 1 < os.size(); ++i) ones = ones && os[i] == 1;
  if (ones) return "";
  if (os.size() != ys.size()) return "its other operand " + shape_str(os) + " has another rank than " + shape_str(ys);
  for (size_t i = 0; i < os.size(); ++i)
    if (os[i] != ys[i]) return "its other operand " + shape_str(os) + " broadcasts against " + shape_str(ys);
  return "";
}

}  // namespace

size_t fold_qadds_into_units(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& add : g.nodes) {
    if (!is_internal_op(&add, "QAdd")) continue;
    // The side a unit makes and the Add alone reads (a first).
    size_t self = kQBinaryInputCount;
    Node* unit = nullptr;
    for (size_t side : {size_t{kQBinaryA}, size_t{kQBinaryB}}) {
      Node* n = const_cast<Node*>(m.producer(add.inputs[side]));
      if (is_unit(n) && n->outputs[0] == add.inputs[side] && !has_stage(*n, Stage::kAdd) &&
          !has_stage(*n, Stage::kDequantize) && m.sole_reader(n->outputs[0]) == &add) {
        unit = n;
        self = side;
        break;
      }
    }
    if (!unit) continue;
    const size_t other = self == kQBinaryA ? kQBinaryB : kQBinaryA;
    const ValueInfo* own = g.value(unit->outputs[0]);
    const ValueInfo* sum = g.value(add.outputs[0]);
    if (!own || !sum || own->dtype != sum->dtype) {
      ctx.refuse("qadd_fold", add, "its result's type differs from " + unit->label() + "'s output type");
      continue;
    }
    const std::string why = shape_problem(g, add.inputs[other], unit->outputs[0]);
    if (!why.empty()) {
      ctx.refuse("qadd_fold", add, why);
      continue;
    }
    const size_t at_self = self == kQBinaryA ? kQBinaryAScale : kQBinaryBScale;
    const size_t at_other = other == kQBinaryA ? kQBinaryAScale : kQBinaryBScale;
    const size_t first = add_stage(*unit, Stage::kAdd, {"", add.inputs[at_self], add.inputs[at_self + 1], add.inputs[at_other],
                                                       add.inputs[at_other + 1], add.inputs[kQBinaryYScale],
                                                       add.inputs[kQBinaryYZero]});
    m.rewire_input(*unit, first + kAddOther, add.inputs[other]);  // counted: the value now has this reader too
    unit->set_attr_i(kQAddReluAttr, add.attr_i("relu", 0));
    note_fused_after(*unit, add.label());
    unit->outputs[0] = add.outputs[0];
    m.kill(&add);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
