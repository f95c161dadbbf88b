// Folds a bias Add into the float MatMul before it: MatMul(A, constant 2-D B) -> Add(constant bias of B's
// columns) becomes one MatMul with the bias as input 2, added in the SGEMM's epilogue (ops/matmul.cc)
// instead of a second pass over the output (a transformer's projections: MiniLM b8 spent 7 of 128 ms in
// such Adds). The bias must be [N], or [1, ..., 1, N] of no higher rank than A, so the shape is unchanged.
// Then a Gelu that alone reads the result (a transformer's or ConvNeXt's MLP) folds in as attribute kThenGelu,
// run on each block of the output while in cache instead of a pass of its own over the widest tensor.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/op.h"

namespace optim {

std::string column_bias(const Graph& g, const Node& add, const std::string& x, int64_t n, size_t rank) {
  if (add.inputs.size() != 2 || (add.inputs[0] == x) == (add.inputs[1] == x)) return "";
  const std::string& name = add.inputs[0] == x ? add.inputs[1] : add.inputs[0];
  const Tensor* b = g.constant(name);
  if (!b || b->dtype != DType::kFloat32 || b->shape.empty() || b->shape.back() != n || b->numel() != n) return "";
  return b->shape.size() == 1 || b->shape.size() <= rank ? name : "";
}

size_t fuse_matmul_bias(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& mm : g.nodes) {
    if (!is_onnx_op(&mm, "MatMul") || mm.inputs.size() != 2) continue;
    const Tensor* w = g.constant(mm.inputs[1]);
    if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 2) continue;
    const ValueInfo* a = g.value(mm.inputs[0]);
    if (!a || a->dtype != DType::kFloat32) continue;
    bool fused = false;
    if (const Node* add = m.sole_reader(mm.outputs[0]); is_onnx_op(add, "Add")) {
      const size_t rank = a->has_shape ? a->shape.size() : 0;
      const std::string bias = column_bias(g, *add, mm.outputs[0], w->shape[1], rank);
      if (!bias.empty()) {
        mm.inputs.push_back(bias);
        note_fused_after(mm, add->label());
        mm.outputs[0] = add->outputs[0];
        m.kill(add);
        fused = true;
      }
    }
    const Node* gelu = m.sole_reader(mm.outputs[0]);
    const std::string approximate = gelu ? gelu->attr_s("approximate", "none") : "";
    if (is_onnx_op(gelu, "Gelu") && gelu->inputs[0] == mm.outputs[0] && (approximate == "none" || approximate == "tanh")) {
      mm.set_attr_s(kThenGelu, approximate);
      note_fused_after(mm, gelu->label());
      mm.outputs[0] = gelu->outputs[0];
      m.kill(gelu);
      fused = true;
    }
    folded += fused;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
