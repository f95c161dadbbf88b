// DequantizeLinear -> MaxPool / Reshape / Flatten / Squeeze / Unsqueeze / Identity -> QuantizeLinear with the
// same scale and zero point on both sides becomes the op alone on the quantized tensor: equal results
// (these ops move or pick values), without the two conversions.
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
// output quantization are the same: data movement, and max (monotonic).
bool passes_quantized(const Node& n) {
  static const std::set<std::string> ops = {"MaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return (n.domain.empty() || n.domain == "ai.onnx") && ops.count(n.op) != 0;
}

}  // namespace

size_t keep_quantized_through_data_movement(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t rewired = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (m.dead().count(i)) continue;
    Node& op = g.nodes[i];
    if (!passes_quantized(op) || op.inputs.empty() || op.outputs.size() != 1) continue;
    if (op.op == "MaxPool" && op.since_version < 12) continue;  // quantized MaxPool came with opset 12
    const Node* dq = m.produced_by(op.inputs[0], "DequantizeLinear");
    const Node* q = m.sole_reader(op.outputs[0]);
    if (!dq || !q || q->op != "QuantizeLinear" || !activation_dq_ok(g, *dq)) continue;
    if (!same_quantization(g, *dq, *q)) {
      ctx.refuse("quantized_data_movement", op, "its input and output are quantized differently");
      continue;
    }
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

}  // namespace optim
