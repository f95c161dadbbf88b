// Rotary position embedding as transformers writes it out (Llama, Qwen2, Mistral: apply_rotary_pos_emb), seven nodes
// per query or key:
//   Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, h, end)), Slice(x, 0, h), axis -1), sin))     h = half the last dim
// (either operand order of each Mul and of the Add) as one Rotary step (ops/rotary.cc): y = x cos + rotate_half(x)
// sin in one pass, where a decode step ran 14 tiny steps per layer.
#include "../graph_matcher.h"
#include "rewrite.h"

namespace optim {
namespace {

constexpr const char* kName = "rotary";

// Whether `slice` cuts x's last axis (of `width`) to [begin, end) with step 1: end may be any value >= width when
// the cut runs to the end.
bool cuts_last_axis(const Graph& g, const Node* slice, const std::string& x, int64_t width, int64_t begin,
                    int64_t end) {
  if (!is_onnx_op(slice, "Slice") || slice->since_version < 10 || slice->inputs.size() < 4 || slice->inputs[0] != x)
    return false;
  const std::vector<int64_t> starts = int64_constant(g, slice->inputs[1]), ends = int64_constant(g, slice->inputs[2]);
  const std::vector<int64_t> axes = int64_constant(g, slice->inputs[3]);
  const bool one_step = slice->inputs.size() < 5 || slice->inputs[4].empty() ||
                        int64_constant(g, slice->inputs[4]) == std::vector<int64_t>{1};
  const ValueInfo* v = g.value(x);
  const int64_t rank = v && v->has_shape ? static_cast<int64_t>(v->shape.size()) : -1;
  if (!one_step || starts.size() != 1 || ends.size() != 1 || axes.size() != 1) return false;
  if (axes[0] != -1 && axes[0] != rank - 1) return false;
  return starts[0] == begin && (ends[0] == end || (end == width && ends[0] >= width));
}

// `mul`'s operands as (the one `pick` accepts, the other), or false.
template <typename Pick>
bool split_mul(const Node* mul, Pick pick, std::string* picked, std::string* other) {
  if (!is_onnx_op(mul, "Mul") || mul->inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k)
    if (pick(mul->inputs[static_cast<size_t>(k)])) {
      *picked = mul->inputs[static_cast<size_t>(k)];
      *other = mul->inputs[static_cast<size_t>(1 - k)];
      return true;
    }
  return false;
}

}  // namespace

size_t fuse_rotary(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& add = g.nodes[i];
    if (m.dead().count(i) || !is_onnx_op(&add, "Add") || add.inputs.size() != 2) continue;
    // One operand: Mul(Concat(Neg(Slice), Slice), sin); the other: Mul(x, cos).
    for (int side = 0; side < 2; ++side) {
      const Node* rotated_mul = m.produced_by(add.inputs[static_cast<size_t>(side)], "Mul");
      const Node* plain_mul = m.produced_by(add.inputs[static_cast<size_t>(1 - side)], "Mul");
      if (!rotated_mul || !plain_mul || m.sole_reader(rotated_mul->outputs[0]) != &add ||
          m.sole_reader(plain_mul->outputs[0]) != &add)
        continue;
      std::string rotated, sin;
      if (!split_mul(rotated_mul, [&](const std::string& v) { return is_onnx_op(m.producer(v), "Concat"); }, &rotated, &sin))
        continue;
      const Node* concat = m.producer(rotated);
      const ValueInfo* rv = g.value(rotated);
      const int64_t axis = concat->attr_i("axis", 0);
      if (concat->inputs.size() != 2 || m.sole_reader(rotated) != rotated_mul ||
          (axis != -1 && !(rv && rv->has_shape && axis == static_cast<int64_t>(rv->shape.size()) - 1)))
        continue;
      const Node* neg = m.produced_by(concat->inputs[0], "Neg");
      const Node* low = m.producer(concat->inputs[1]);
      const Node* high = neg ? m.producer(neg->inputs[0]) : nullptr;
      if (!neg || !high || !low || m.sole_reader(neg->outputs[0]) != concat || m.sole_reader(high->outputs[0]) != neg ||
          m.sole_reader(low->outputs[0]) != concat)
        continue;
      const std::string x = high->inputs.empty() ? "" : high->inputs[0];
      const int64_t width = last_dim(g, x);
      if (width <= 0 || width % 2 != 0 || !has_dtype(g, x, DType::kFloat32)) continue;
      if (!cuts_last_axis(g, high, x, width, width / 2, width) || !cuts_last_axis(g, low, x, width, 0, width / 2)) {
        ctx.refuse(kName, add, "the Slices do not take the two halves of the last axis");
        continue;
      }
      std::string same_x, cos;
      if (!split_mul(plain_mul, [&](const std::string& v) { return v == x; }, &same_x, &cos)) continue;
      if (!has_dtype(g, cos, DType::kFloat32) || !has_dtype(g, sin, DType::kFloat32)) continue;
      Node fused;
      fused.name = add.name;
      fused.op = "Rotary";
      fused.domain = kInternalDomain;
      fused.since_version = 1;
      fused.inputs = {x, cos, sin};
      fused.outputs = add.outputs;
      for (const Node* n : {&add, rotated_mul, plain_mul, concat, neg, high, low}) m.kill(n);
      added.push_back(std::move(fused));
      break;
    }
  }
  return commit_added(g, m, added);
}

}  // namespace optim
