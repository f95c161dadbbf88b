// Folds a DequantizeLinear into the channels-last GlobalAveragePool that alone reads it (a squeeze-excite's
// pool in a QDQ model): the pool takes the quantized map and the scale and zero point as inputs 1 and 2
// (ops/pool_nhwc.cc sums the bytes), so the float copy of the map is never made. Per-tensor quantization only.
#include "rewrite.h"

#include "../graph_matcher.h"

namespace optim {

size_t fold_dequantize_into_pools(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& pool : g.nodes) {
    if (!is_internal_op(&pool, "NhwcGlobalAveragePool") || pool.inputs.size() != 1) continue;
    Node* dq = const_cast<Node*>(m.produced_by(pool.inputs[0], "DequantizeLinear"));
    if (!dq || m.sole_reader(pool.inputs[0]) != &pool) continue;
    const ValueInfo* x = g.value(dq->inputs[0]);
    const Tensor* scale = dq->has_input(1) ? g.constant(dq->inputs[1]) : nullptr;
    const Tensor* zero = dq->has_input(2) ? g.constant(dq->inputs[2]) : nullptr;
    if (!x || (x->dtype != DType::kUint8 && x->dtype != DType::kInt8)) continue;
    if (!scale || scale->dtype != DType::kFloat32 || scale->numel() != 1 || (dq->has_input(2) && (!zero || zero->numel() != 1))) {
      ctx.refuse("dequantize_pool", *dq, "its scale or zero point is not one constant (per-channel or computed)");
      continue;
    }
    pool.inputs = {dq->inputs[0], dq->inputs[1], dq->has_input(2) ? dq->inputs[2] : ""};
    note_fused_before(pool, dq->label());
    m.kill(dq);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
