#include "hardswish_fusion.h"

#include "../graph_matcher.h"

namespace optim {

size_t fuse_hardswish(Graph& g, const std::vector<std::string>& outputs) {
  Matcher m(g, outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mul = g.nodes[i];
    if (m.dead().count(i) || mul.op != "Mul" || !(mul.domain.empty() || mul.domain == "ai.onnx") || mul.inputs.size() != 2)
      continue;
    for (size_t side = 0; side < 2; ++side) {
      const Node* hs = m.produced_by(mul.inputs[side], "HardSigmoid");
      if (!hs || hs->inputs[0] != mul.inputs[1 - side] || m.sole_reader(hs->outputs[0]) != &mul) continue;
      Node swish;
      swish.name = mul.name;
      swish.op = "HardSwish";
      swish.since_version = 14;
      swish.inputs = {hs->inputs[0]};
      swish.outputs = mul.outputs;
      swish.attrs = hs->attrs;  // alpha, beta: the HardSigmoid's (HardSwish's own are 1/6 and 1/2)
      for (const char* name : {"alpha", "beta"}) {
        if (swish.attrs.count(name)) continue;
        Attr a;
        a.type = ORT_OP_ATTR_FLOAT;
        a.f = std::string(name) == "alpha" ? 0.2f : 0.5f;  // HardSigmoid's defaults
        swish.attrs[name] = a;
      }
      m.kill(&mul);
      m.kill(hs);
      added.push_back(std::move(swish));
      break;
    }
  }
  const size_t fused = added.size();
  if (fused) commit_rewrites(g, m, added);
  return fused;
}

}  // namespace optim
