// Folds the layout change at a partition's input into the stem convolution that alone reads it: ToNhwc(x) -> NhwcConv
// / NhwcQConv with few input channels (an RGB image) becomes the convolution reading x [N, C, H, W] itself, attribute
// nchw_input; it copies its padded input once anyway (ops/conv_nhwc_algorithms.cc, NchwStem: by bands of rows in
// cache; ops/qconv_nhwc.cc: prepare_nchw_rows), so the transposed image is never stored (the ONNX Runtime CPU EP's
// NCHWc stem does the same). An integer stem also takes in its input's QuantizeLinear when it alone reads it
// (fold_input_quantize). Runs last: the choices of the rewrites before (Winograd, folded depthwise, channel
// scales, blocks, gates) rule one out.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_nhwc.h"
#include "../ops/qconv_block.h"
#include "../ops/quant_params.h"

namespace optim {

namespace {

constexpr int64_t kMaxStemChannels = 4;  // more: the channels-first reads cost more than the transpose they save

bool same_scalar(const Tensor* a, const Tensor* b) {
  if (!a || !b || a->dtype != b->dtype || a->numel() != 1 || b->numel() != 1) return false;
  if (a->dtype == DType::kFloat32) return a->data<float>()[0] == b->data<float>()[0];
  return (a->dtype == DType::kUint8 || a->dtype == DType::kInt8) && int8_at(*a, 0) == int8_at(*b, 0);
}

// The integer stem's input quantized by a QuantizeLinear that only it reads, with the stem's own x scale and zero
// point (a QDQ pair): the stem quantizes the float32 image as it copies it (attribute quantize_input), and the
// quantized image is never stored. Same integers: the kernels do QuantizeLinear's operations (quantize_pixels).
void fold_input_quantize(const Graph& g, Matcher& m, Node& conv) {
  const Node* q = m.produced_by(conv.inputs[0], "QuantizeLinear");
  if (!q || m.sole_reader(q->outputs[0]) != &conv || q->inputs.size() < 3 || q->attr_i("saturate", 1) != 1) return;
  const ValueInfo* x = g.value(q->inputs[0]);
  const ValueInfo* y = g.value(q->outputs[0]);
  if (!x || x->dtype != DType::kFloat32 || !y || (y->dtype != DType::kUint8 && y->dtype != DType::kInt8)) return;
  const Tensor* zero = g.constant(q->inputs[2]);
  if (!same_scalar(g.constant(q->inputs[1]), g.constant(conv.inputs[kQGemmXScale])) || !zero || zero->dtype != y->dtype ||
      !conv.has_input(kQGemmXZero) || !same_scalar(zero, g.constant(conv.inputs[kQGemmXZero])))
    return;
  m.rewire_input(conv, 0, q->inputs[0]);
  conv.set_attr_i(kQuantizeInputAttr, 1);
  note_fused_before(conv, q->label());
  m.kill(q);
}

}  // namespace

size_t read_nchw_in_stems(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& layout : g.nodes) {
    if (!is_internal_op(&layout, "ToNhwc") || layout.inputs.empty()) continue;
    Node* conv = const_cast<Node*>(m.sole_reader(layout.outputs[0]));
    const bool integer = is_internal_op(conv, "NhwcQConv");
    if (!(integer || is_internal_op(conv, "NhwcConv")) || conv->inputs[0] != layout.outputs[0]) continue;
    const size_t weights = integer ? size_t{kQGemmW} : size_t{1};
    const Tensor* w = conv->has_input(weights) ? g.constant(conv->inputs[weights]) : nullptr;
    if (!w || w->shape.size() != 4) continue;
    const ConvGeometry cg(*conv, w->shape);
    const bool depthwise = cg.cin_g == 1 && cg.cout == cg.group;  // runs on its own kernels, reading channels last
    const bool plain = cg.group == 1 && !depthwise && !conv->has_attr("algorithm") && !has_stage(*conv, Stage::kFloatDepthwise) &&
                       !(integer ? is_qconv_block(*conv) || has_stage(*conv, Stage::kGate) : has_stage(*conv, Stage::kChannelScale) || has_stage(*conv, Stage::kFloatExpansion)) &&
                       conv->outputs.size() == 1;
    if (!plain || cg.cin_g > kMaxStemChannels) continue;
    m.rewire_input(*conv, 0, layout.inputs[0]);
    conv->set_attr_i(kNchwInputAttr, 1);
    note_fused_before(*conv, layout.label());
    m.kill(&layout);
    if (integer) fold_input_quantize(g, m, *conv);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
