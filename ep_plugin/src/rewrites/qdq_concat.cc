// QuantizeLinear(Concat(DequantizeLinear(x1), DequantizeLinear(x2), ...)) with per-tensor parameters
// becomes Concat(y1, y2, ...) on the quantized tensors: yi is xi itself where it is quantized as the output
// is, else QuantizeLinear(DequantizeLinear(xi)) into the output's quantization, which qdq_lut then turns
// into a 256-byte table. Equal results (Concat moves values, and the Q / DQ act per element), and the
// concatenation moves bytes instead of floats, with no float tensor the size of the output (a
// segmentation decoder's concatenated features, a detector's neck).
#include "rewrite.h"

#include <vector>

#include "../graph_matcher.h"
#include "qdq_checks.h"

namespace optim {
namespace {

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

}  // namespace

size_t quantize_concat_inputs(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  size_t rewritten = 0;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i) || !is_onnx(g.nodes[i]) || g.nodes[i].op != "Concat" || g.nodes[i].outputs.size() != 1) continue;
    const Node* q = m.sole_reader(g.nodes[i].outputs[0]);
    if (!q || q->op != "QuantizeLinear" || !is_onnx(*q) || !is_float_scalar(g, q->inputs[1]) || !is_int8_scalar_or_absent(g, *q, 2) ||
        q->attr_i("block_size", 0) != 0)
      continue;
    std::vector<const Node*> dqs;
    for (const auto& in : g.nodes[i].inputs) {
      const Node* dq = in.empty() ? nullptr : m.produced_by(in, "DequantizeLinear");
      if (!dq || !activation_dq_ok(g, *dq)) break;
      dqs.push_back(dq);
    }
    if (dqs.size() != g.nodes[i].inputs.size()) {
      ctx.refuse("qdq_concat", g.nodes[i], "an input is not a per-tensor DequantizeLinear of uint8/int8");
      continue;
    }
    for (size_t k = 0; k < dqs.size(); ++k) {
      const Node& dq = *dqs[k];
      if (same_quantization(g, dq, *q)) {  // already quantized as the output is: its bytes as they are
        m.rewire_input(g.nodes[i], k, dq.inputs[0]);
        m.kill_if_unread(&dq);
        continue;
      }
      added.push_back(requantize_like(g, dq, *q));  // into the output's quantization
      m.rewire_input(g.nodes[i], k, added.back().outputs[0]);
    }
    g.nodes[i].outputs[0] = q->outputs[0];
    m.kill(q);
    ++rewritten;
  }
  if (!rewritten) return 0;
  commit_rewrites(g, m, added);
  return rewritten;
}

}  // namespace optim
