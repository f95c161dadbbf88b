// Folds a QLut into the integer unit (QGemm, NhwcQConv) that alone makes its input (ops/lut_after.h): the unit
// takes the table as attribute then_lut and the QLut's output as its own. The table must give the unit's own
// type back (uint8 in, uint8 out), which the unit's requantization is written in. Runs after qadd_fold (a unit's
// QAdd comes first, its table after) and before dequantize_fold (whose DequantizeLinear reads the table's
// bytes) and the depthwise blocks (whose units bring their tables).
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/lut_after.h"

namespace optim {

size_t fold_luts_into_units(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& lut : g.nodes) {
    if (!is_internal_op(&lut, "QLut") || lut.inputs.size() < 2) continue;
    Node* unit = const_cast<Node*>(m.producer(lut.inputs[0]));
    if (!(is_internal_op(unit, "QGemm") || is_internal_op(unit, "NhwcQConv")) || unit->outputs.empty() ||
        unit->outputs[0] != lut.inputs[0] || unit->has_attr(kLutAfterAttr) || m.sole_reader(lut.inputs[0]) != &lut)
      continue;
    const ValueInfo* in = g.value(lut.inputs[0]);
    const ValueInfo* out = g.value(lut.outputs[0]);
    const Tensor* table = g.constant(lut.inputs[1]);
    if (!in || !out || in->dtype != out->dtype) {
      ctx.refuse("lut_fold", lut, "its output type differs from " + unit->label() + "'s output type");
      continue;
    }
    if (!table || table->dtype != DType::kUint8 || table->numel() != 256) continue;  // QLut itself says why
    std::vector<int64_t> entries(256);
    for (size_t i = 0; i < 256; ++i) entries[i] = table->data<uint8_t>()[i];
    unit->set_attr_ints(kLutAfterAttr, entries);
    note_fused_after(*unit, lut.label());
    unit->outputs[0] = lut.outputs[0];
    m.kill(&lut);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
