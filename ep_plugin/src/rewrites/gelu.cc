// The exact GELU as exporters write it out, x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes (Div or Mul, Erf,
// Add, Mul, Mul in either order), as one Gelu node: one pass over the tensor instead of five.
#include <cmath>

#include "../graph_matcher.h"
#include "rewrite.h"

namespace optim {
namespace {

bool near(float v, double want) { return std::fabs(v - want) <= 1e-6 * std::fabs(want); }

}  // namespace

size_t fuse_gelu(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& erf = g.nodes[i];
    if (m.dead().count(i) || !is_onnx_op(&erf, "Erf")) continue;
    // x / sqrt(2) or x * (1 / sqrt(2)), read by the Erf alone.
    const Node* scale = m.produced_by(erf.inputs[0], "Div");
    float c = 0.f;
    std::string x;
    if (scale) {
      if (scale->inputs.size() != 2 || !float_scalar_constant(g, scale->inputs[1], &c) || !near(c, std::sqrt(2.0))) continue;
      x = scale->inputs[0];
    } else {
      scale = m.produced_by(erf.inputs[0], "Mul");
      if (!scale || !scalar_operand(g, *scale, &c, &x) || !near(c, std::sqrt(0.5))) continue;
    }
    if (m.sole_reader(scale->outputs[0]) != &erf) continue;
    const Node* add = m.sole_reader(erf.outputs[0]);
    std::string other;
    if (!is_onnx_op(add, "Add") || !scalar_operand(g, *add, &c, &other) || c != 1.f) continue;
    // Then * 0.5 and * x, in either order.
    const Node* m1 = m.sole_reader(add->outputs[0]);
    if (!is_onnx_op(m1, "Mul") || m1->inputs.size() != 2) continue;
    const Node* m2 = m.sole_reader(m1->outputs[0]);
    if (!is_onnx_op(m2, "Mul") || m2->inputs.size() != 2) continue;
    const bool half_first = scalar_operand(g, *m1, &c, &other) && c == 0.5f;
    const Node* by_half = half_first ? m1 : m2;
    const Node* by_x = half_first ? m2 : m1;
    if (!scalar_operand(g, *by_half, &c, &other) || c != 0.5f) continue;
    const std::string& prev = by_x == m1 ? add->outputs[0] : m1->outputs[0];
    const bool x_times = (by_x->inputs[0] == x && by_x->inputs[1] == prev) || (by_x->inputs[1] == x && by_x->inputs[0] == prev);
    if (!x_times) continue;
    Node gelu;
    gelu.name = erf.name;
    gelu.op = "Gelu";
    gelu.since_version = 20;
    gelu.inputs = {x};
    gelu.outputs = {m2->outputs[0]};
    for (const Node* n : {scale, &erf, add, m1, m2}) m.kill(n);
    added.push_back(std::move(gelu));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
