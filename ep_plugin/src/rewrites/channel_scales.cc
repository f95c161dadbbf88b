// Folds a squeeze-excite gate into the 1x1 convolution after it: Mul(x [N,H,W,C], s [N,1,1,C]) read only by a float
// 1x1 NhwcConv (stride 1, no padding, one group) becomes that convolution on x with s as its stage kChannelScale, so
// the gated map is never stored (EfficientNet-B0 b8 spent 3 of 62 ms in those Muls). ops/conv_nhwc_algorithms.cc
// (ChannelScaled) scales each image's packed weights by its s (conv(x * s) = x * (s W)) on large images, and on small
// ones (7x7 and 14x14 in MobileNetV3, where rescaling weights costs more than the Mul) scales the rows each task is
// about to multiply, in cache.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_common.h"

namespace optim {

namespace {

// x's shape when it is [N, H, W, C] with H, W, C known, else empty.
Shape image_shape(const Graph& g, const std::string& name) {
  const ValueInfo* v = g.value(name);
  if (!v || !v->has_shape || v->dtype != DType::kFloat32 || v->shape.size() != 4) return {};
  for (size_t d = 1; d < 4; ++d)
    if (v->shape[d] <= 0) return {};
  return v->shape;
}

// Whether `s` is a per-image, per-channel gate for x: [N or 1, 1, 1, C].
bool is_gate(const Graph& g, const std::string& s, const Shape& x) {
  const ValueInfo* v = g.value(s);
  if (!v || !v->has_shape || v->dtype != DType::kFloat32 || v->shape.size() != 4) return false;
  const Shape& t = v->shape;
  return t[1] == 1 && t[2] == 1 && t[3] == x[3] && (t[0] == 1 || t[0] == x[0] || t[0] < 0);
}

}  // namespace

size_t fold_channel_scales(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& mul : g.nodes) {
    if (!is_onnx_op(&mul, "Mul") || mul.inputs.size() != 2) continue;
    Node* conv = const_cast<Node*>(m.sole_reader(mul.outputs[0]));
    if (!is_internal_op(conv, "NhwcConv") || conv->inputs[0] != mul.outputs[0]) continue;
    if (conv->has_attr("algorithm") || has_stage(*conv, Stage::kFloatDepthwise) || has_stage(*conv, Stage::kChannelScale))
      continue;
    const Tensor* w = g.constant(conv->inputs[1]);
    if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 4) continue;
    const ConvGeometry cg(*conv, w->shape);
    if (!cg.is_pointwise()) continue;
    int x = -1;
    for (int k = 0; k < 2 && x < 0; ++k) {
      const Shape xs = image_shape(g, mul.inputs[static_cast<size_t>(k)]);
      if (!xs.empty() && xs[3] == cg.cin_g && is_gate(g, mul.inputs[static_cast<size_t>(1 - k)], xs)) x = k;
    }
    if (x < 0) continue;
    conv->inputs[0] = mul.inputs[static_cast<size_t>(x)];
    add_stage(*conv, Stage::kChannelScale, {mul.inputs[static_cast<size_t>(1 - x)]});
    note_fused_before(*conv, mul.label());
    m.kill(&mul);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
