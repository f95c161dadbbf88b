// Folds a float depthwise convolution into the 1x1 convolution that alone reads it (ops/conv_dw_pw.h): the
// pointwise NhwcConv takes the depthwise's input as its own, its weights and bias as inputs 4 and 5, and its
// geometry and epilogue as "dw_" attributes, so the depthwise output is made and used a tile at a time in
// cache (MobileNet blocks without squeeze-excite: expansion -> depthwise -> projection). Runs after
// conv_epilogues: the depthwise brings its clamp and activation, the pointwise its residual.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_common.h"
#include "../ops/qgemm.h"  // kInternalDomain

namespace optim {

namespace {

bool is_nhwc_conv(const Node* n) { return n && n->domain == kInternalDomain && n->op == "NhwcConv"; }

// The geometry of a float NhwcConv with constant 2-D weights, or false.
bool geometry(const Graph& g, const Node& n, ConvGeometry* cg) {
  const Tensor* w = n.has_input(1) ? g.constant(n.inputs[1]) : nullptr;
  if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 4) return false;
  *cg = ConvGeometry(n, w->shape);
  return true;
}

constexpr const char* kDepthwiseAttrs[] = {"kernel_shape", "strides", "pads", "dilations", "auto_pad",
                                           "activation_min", "activation_max", "activation", "activation_alpha",
                                           "activation_beta"};

}  // namespace

size_t fold_depthwise_into_pointwise(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& dw : g.nodes) {
    ConvGeometry d, p;
    if (!is_nhwc_conv(&dw) || !geometry(g, dw, &d)) continue;
    if (d.cin_g != 1 || d.cout != d.group || dw.has_input(3) || dw.has_attr("algorithm") || dw.has_attr("dw_group")) continue;
    Node* pw = const_cast<Node*>(m.sole_reader(dw.outputs[0]));
    if (!is_nhwc_conv(pw) || pw->inputs[0] != dw.outputs[0] || !geometry(g, *pw, &p)) continue;
    if (!p.is_pointwise() || pw->has_attr("algorithm") || pw->has_attr("dw_group") || pw->has_input(6)) {
      ctx.refuse("depthwise_pointwise", dw, "its reader " + pw->label() + " is not a 1x1 convolution of stride 1 without padding");
      continue;
    }
    pw->inputs[0] = dw.inputs[0];
    pw->inputs.resize(6);  // 2 and 3 (bias, residual) stay as they were, or empty
    pw->inputs[4] = dw.inputs[1];
    pw->inputs[5] = dw.has_input(2) ? dw.inputs[2] : "";
    for (const char* name : kDepthwiseAttrs) {
      auto it = dw.attrs.find(name);
      if (it != dw.attrs.end()) pw->attrs[std::string("dw_") + name] = it->second;
    }
    Attr group;  // always set: what marks the fold for ops/conv_nhwc.cc
    group.type = ORT_OP_ATTR_INT;
    group.i = d.group;
    pw->attrs["dw_group"] = group;
    pw->set_attr_s("fused_before", dw.label() + (dw.has_attr("fused") ? " + " + dw.attr_s("fused", "") : ""));
    m.kill(&dw);
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
