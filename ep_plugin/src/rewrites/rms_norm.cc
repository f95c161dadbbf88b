// RMSNorm as exporters write it out (Llama, Qwen2, Mistral...), seven nodes per norm:
//   Mul(w, Mul(x, Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2), [-1]), eps)))))   (or x / Sqrt(...), w on either side)
// as one RMSNormalization (ops/normalization.cc): one pass over each row instead of seven steps, which in a
// decode step (one token, 25 norms) cost more in step overhead than in arithmetic.
#include "../graph_matcher.h"
#include "rewrite.h"

namespace optim {
namespace {

// Whether ReduceMean n averages over the last axis only, keeping it.
bool mean_of_last_axis(const Graph& g, const Node& n) {
  if (n.attr_i("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.since_version >= 18) {
    const Tensor* t = n.inputs.size() > 1 ? g.constant(n.inputs[1]) : nullptr;
    if (!t || t->dtype != DType::kInt64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  return axes == std::vector<int64_t>{-1};
}

}  // namespace

size_t fuse_rms_norm(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& pow = g.nodes[i];
    float c = 0.f, eps = 0.f;
    if (m.dead().count(i) || !is_onnx_op(&pow, "Pow") || pow.inputs.size() != 2 ||
        !float_scalar_constant(g, pow.inputs[1], &c) || c != 2.f)
      continue;
    const std::string& x = pow.inputs[0];
    const Node* mean = m.sole_reader(pow.outputs[0]);
    if (!is_onnx_op(mean, "ReduceMean") || !mean_of_last_axis(g, *mean)) continue;
    const Node* add = m.sole_reader(mean->outputs[0]);
    if (!is_onnx_op(add, "Add") || !float_scalar_constant(g, other_input(*add, mean->outputs[0]), &eps)) continue;
    const Node* root = m.sole_reader(add->outputs[0]);
    if (!is_onnx_op(root, "Sqrt")) continue;
    // x * (1 / root) or x / root.
    const Node* inverse = m.sole_reader(root->outputs[0]);
    const Node* normed = nullptr;
    if (is_onnx_op(inverse, "Reciprocal")) {
      normed = m.sole_reader(inverse->outputs[0]);
      if (!is_onnx_op(normed, "Mul") || other_input(*normed, inverse->outputs[0]) != x) continue;
    } else if (is_onnx_op(inverse, "Div") && inverse->inputs.size() == 2 && inverse->inputs[0] == x &&
               inverse->inputs[1] == root->outputs[0]) {
      normed = inverse;
      inverse = nullptr;
    } else {
      continue;
    }
    const int64_t width = last_dim(g, x);
    if (width <= 0 || !has_dtype(g, x, DType::kFloat32)) continue;
    // Then the weight: a float constant of one value per element of the row.
    const Node* weighted = m.sole_reader(normed->outputs[0]);
    std::string w;
    if (is_onnx_op(weighted, "Mul")) {
      w = other_input(*weighted, normed->outputs[0]);
      const Tensor* t = g.constant(w);
      if (!t || t->dtype != DType::kFloat32 || t->shape.size() != 1 || t->numel() != width) weighted = nullptr;
    } else {
      weighted = nullptr;
    }
    if (!weighted) {
      Tensor ones;
      ones.dtype = DType::kFloat32;
      ones.shape = {width};
      ones.bytes.assign(static_cast<size_t>(width) * sizeof(float), 0);
      for (int64_t j = 0; j < width; ++j) reinterpret_cast<float*>(ones.bytes.data())[j] = 1.f;
      w = g.add_constant(pow.name + "_ones", std::move(ones));
    }
    Node norm;
    norm.name = pow.name;
    norm.op = "RMSNormalization";
    norm.since_version = 23;
    norm.inputs = {x, w};
    norm.outputs = {(weighted ? weighted : normed)->outputs[0]};
    norm.set_attr_i("axis", -1);
    norm.set_attr_f("epsilon", eps);
    for (const Node* n : {&pow, mean, add, root, inverse, normed, weighted})
      if (n) m.kill(n);
    added.push_back(std::move(norm));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
