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

// A fresh value name based on `base`.
std::string fresh_value(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.values.count(name) || g.constants.count(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

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
    const DType qt = dtype_of(g, q->outputs[0]);
    for (size_t k = 0; k < dqs.size(); ++k) {
      const Node& dq = *dqs[k];
      if (same_quantization(g, dq, *q)) {  // already quantized as the output is: its bytes as they are
        m.rewire_input(g.nodes[i], k, dq.inputs[0]);
        m.kill_if_unread(&dq);
        continue;
      }
      Node rq;  // into the output's quantization: qdq_lut makes DQ -> Q one table
      const std::string out = fresh_value(g, dq.outputs[0] + "/requantized");
      ValueInfo vi;
      vi.name = out;
      vi.dtype = qt;
      if (const ValueInfo* src = g.value(dq.outputs[0])) {
        vi.has_shape = src->has_shape;
        vi.shape = src->shape;
      }
      g.values[out] = vi;
      rq.name = out + "/QuantizeLinear";
      rq.op = "QuantizeLinear";
      rq.since_version = q->since_version;
      rq.inputs = {dq.outputs[0], q->inputs[1]};
      if (q->has_input(2)) rq.inputs.push_back(q->inputs[2]);
      rq.outputs = {out};
      rq.attrs = q->attrs;
      m.rewire_input(g.nodes[i], k, out);
      added.push_back(std::move(rq));
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
