// Activations exporters write as a product with the input, folded into one step that reads the tensor once:
//   x * HardSigmoid(x) -> HardSwish (ONNX's HardSwish function, which ONNX Runtime inlines; the HardSigmoid's
//                         own alpha and beta are kept, so the arithmetic is the same)
//   x * Sigmoid(x)     -> Silu (internal: SiLU / Swish, as EfficientNet and YOLO write it)
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/qgemm.h"

namespace optim {

size_t fuse_activations(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mul = g.nodes[i];
    if (m.dead().count(i) || mul.op != "Mul" || !(mul.domain.empty() || mul.domain == "ai.onnx") || mul.inputs.size() != 2)
      continue;
    for (size_t side = 0; side < 2; ++side) {
      const Node* gate = m.produced_by(mul.inputs[side], "HardSigmoid");
      const bool hard = gate != nullptr;
      if (!gate) gate = m.produced_by(mul.inputs[side], "Sigmoid");
      if (!gate || gate->inputs[0] != mul.inputs[1 - side] || m.sole_reader(gate->outputs[0]) != &mul) continue;
      Node fused;
      fused.name = mul.name;
      fused.inputs = {gate->inputs[0]};
      fused.outputs = mul.outputs;
      if (hard) {
        fused.op = "HardSwish";
        fused.since_version = 14;
        fused.attrs = gate->attrs;  // alpha, beta: the HardSigmoid's (HardSwish's own are 1/6 and 1/2)
        for (const char* name : {"alpha", "beta"}) {
          if (fused.attrs.count(name)) continue;
          Attr a;
          a.type = ORT_OP_ATTR_FLOAT;
          a.f = std::string(name) == "alpha" ? 0.2f : 0.5f;  // HardSigmoid's defaults
          fused.attrs[name] = a;
        }
      } else {
        fused.op = "Silu";
        fused.domain = kInternalDomain;
        fused.since_version = 1;
      }
      m.kill(&mul);
      m.kill(gate);
      added.push_back(std::move(fused));
      break;
    }
  }
  return commit_added(g, m, added);
}

}  // namespace optim
