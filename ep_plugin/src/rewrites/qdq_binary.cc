// DequantizeLinear(a) + DequantizeLinear(b) [-> Relu] -> QuantizeLinear (residual adds) becomes one internal
// QAdd node on the quantized tensors; the same with Mul (squeeze-excite scales) a QMul node.
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

// `op` is "Add" or "Mul"; `rewrite` names the rewrite in refusals.
size_t fuse_qdq_binary(Graph& g, RewriteContext& ctx, const char* op, const char* rewrite) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i)) continue;
    const Node& bin = g.nodes[i];
    if (bin.op != op || !(bin.domain.empty() || bin.domain == "ai.onnx") || bin.inputs.size() != 2) continue;
    const Node* da = m.produced_by(bin.inputs[0], "DequantizeLinear");
    const Node* db = m.produced_by(bin.inputs[1], "DequantizeLinear");
    if (!da || !db || !activation_dq_ok(g, *da) || !activation_dq_ok(g, *db)) continue;
    std::vector<const Node*> chain;
    const Node* next = m.sole_reader(bin.outputs[0]);
    bool relu = false;
    if (next && next->op == "Relu") {
      relu = true;
      chain.push_back(next);
      next = m.sole_reader(next->outputs[0]);
    }
    if (!next || next->op != "QuantizeLinear" || !is_float_scalar(g, next->inputs[1]) || !is_int8_scalar_or_absent(g, *next, 2)) {
      ctx.refuse(rewrite, bin, "its result is not read by one QuantizeLinear per tensor (through an optional Relu)");
      continue;
    }
    const DType out_type = dtype_of(g, next->outputs[0]);
    if (out_type != DType::kUint8 && out_type != DType::kInt8) continue;
    Node q;
    q.name = bin.name;
    q.op = std::string("Q") + op;
    q.domain = kInternalDomain;
    q.since_version = 1;
    q.inputs = {da->inputs[0], da->inputs[1], da->has_input(2) ? da->inputs[2] : "",
                db->inputs[0], db->inputs[1], db->has_input(2) ? db->inputs[2] : "",
                next->inputs[1], next->has_input(2) ? next->inputs[2] : ""};
    q.outputs = {next->outputs[0]};
    q.set_attr_i("relu", relu ? 1 : 0);
    retire_pattern(m, bin, chain, next, {da, db});
    added.push_back(std::move(q));
  }
  return commit_added(g, m, added);
}

}  // namespace

size_t fuse_qdq_adds(Graph& g, RewriteContext& ctx) { return fuse_qdq_binary(g, ctx, "Add", "qdq_adds"); }
size_t fuse_qdq_muls(Graph& g, RewriteContext& ctx) { return fuse_qdq_binary(g, ctx, "Mul", "qdq_muls"); }

}  // namespace optim
