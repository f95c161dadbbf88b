// A transformer's tokens [B, H*W, C] are already a channels-last feature map [B, H, W, C]. Vision transformers
// with convolutions (SegFormer's Mix-FFN and decoder, PVT) write the way between the two through NCHW:
//   tokens -> Transpose(0, 2, 1) -> Reshape [B, C, H, W] -> (conv) -> Reshape [B, C, H*W] -> Transpose(0, 2, 1)
// and channels_last then adds ToNhwc / ToNchw around the convolution: two transposes and two layout changes
// that move every value to land where it started. Here ToNhwc(Reshape(Transpose(tokens))) becomes
// Reshape(tokens, [0, H, W, C]) and Transpose(Reshape(ToNchw(map))) becomes Reshape(map, [0, H*W, C]): views,
// no data moved. Runs after channels_last (whose layout changes it reads) and before the folds after it.
#include "rewrite.h"

#include "../graph_matcher.h"

namespace optim {

namespace {

bool swaps_last_two_of_three(const Node* n) {
  return is_onnx_op(n, "Transpose") && n->attr_ints("perm") == std::vector<int64_t>{0, 2, 1};
}

// The static dims of `v` after the first (the batch may be dynamic), or empty when any is unknown.
Shape known_tail(const Graph& g, const std::string& v, size_t rank) {
  const ValueInfo* vi = g.value(v);
  if (!vi || !vi->has_shape || vi->shape.size() != rank) return {};
  Shape tail(vi->shape.begin() + 1, vi->shape.end());
  for (int64_t d : tail)
    if (d <= 0) return {};
  return tail;
}

// A Reshape of `x` to [0, dims...] (0: the batch, copied) producing `out`, with its constant shape.
Node view(Graph& g, const std::string& x, const std::string& out, const Shape& dims) {
  std::vector<int64_t> values = {0};
  values.insert(values.end(), dims.begin(), dims.end());
  Node r;
  r.name = out + "/view";
  r.op = "Reshape";
  r.since_version = 14;
  r.inputs = {x, g.add_constant(out + "/view_shape", Tensor::of_int64(values))};
  r.outputs = {out};
  return r;
}

}  // namespace

size_t view_tokens_as_maps(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (Node& n : g.nodes) {
    if (is_internal_op(&n, "ToNhwc")) {  // tokens -> Transpose -> Reshape [B, C, H, W] -> ToNhwc
      const Node* rs = m.produced_by(n.inputs[0], "Reshape");
      const Node* tr = rs ? m.producer(rs->inputs[0]) : nullptr;
      if (!swaps_last_two_of_three(tr)) continue;
      const Shape tokens = known_tail(g, tr->inputs[0], 3), map = known_tail(g, rs->outputs[0], 4);  // [N, C], [C, H, W]
      if (tokens.empty() || map.empty() || tokens[1] != map[0] || tokens[0] != map[1] * map[2]) {
        ctx.refuse("token_grid", *rs, "its tokens and feature map are not [B, H*W, C] and [B, C, H, W] of known H, W, C");
        continue;
      }
      added.push_back(view(g, tr->inputs[0], n.outputs[0], {map[1], map[2], map[0]}));
      m.kill(&n);
      m.kill_if_unread(rs);
      m.kill_if_unread(tr);
    } else if (swaps_last_two_of_three(&n)) {  // map -> ToNchw -> Reshape [B, C, H*W] -> Transpose
      const Node* rs = m.produced_by(n.inputs[0], "Reshape");
      const Node* tn = rs ? m.producer(rs->inputs[0]) : nullptr;
      if (!is_internal_op(tn, "ToNchw")) continue;
      const Shape map = known_tail(g, tn->inputs[0], 4), tokens = known_tail(g, n.outputs[0], 3);  // [H, W, C], [N, C]
      if (map.empty() || tokens.empty() || tokens[1] != map[2] || tokens[0] != map[0] * map[1]) {
        ctx.refuse("token_grid", n, "its feature map and tokens are not [B, H, W, C] and [B, H*W, C] of known H, W, C");
        continue;
      }
      added.push_back(view(g, tn->inputs[0], n.outputs[0], tokens));
      m.kill(&n);
      m.kill_if_unread(rs);
      m.kill_if_unread(tn);
    }
  }
  return commit_added(g, m, added);
}

}  // namespace optim
