// Folds a float depthwise convolution into the 1x1 convolution that alone reads it (ops/conv_dw_pw.h): the
// pointwise NhwcConv takes the depthwise's input as its own, its weights and bias as inputs 4 and 5, and its
// geometry and epilogue as "dw_" attributes, so the depthwise output is made and used a tile at a time in
// cache (MobileNet blocks without squeeze-excite: expansion -> depthwise -> projection). The 1x1 expansion
// that alone feeds that depthwise follows it in where that pays (inputs 7 and 8, "ex_" attributes): then the
// expanded tensor is never stored either. A depthwise read by a squeeze-excite takes its expansion itself, and
// the global average pool of its output as a second output. Runs after conv_epilogues: each brings its clamp
// and activation, the projection its residual.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_common.h"

namespace optim {

namespace {

// The geometry of a float NhwcConv with constant 2-D weights, or false.
bool geometry(const Graph& g, const Node& n, ConvGeometry* cg) {
  const Tensor* w = n.has_input(1) ? g.constant(n.inputs[1]) : nullptr;
  if (!w || w->dtype != DType::kFloat32 || w->shape.size() != 4) return false;
  *cg = ConvGeometry(n, w->shape);
  return true;
}

constexpr const char* kEpilogueAttrs[] = {"activation_min", "activation_max", "activation", "activation_alpha",
                                          "activation_beta"};
constexpr const char* kWindowAttrs[] = {"kernel_shape", "strides", "pads", "dilations", "auto_pad"};

void copy_attrs(const Node& from, Node* to, const char* prefix) {
  for (const char* name : kEpilogueAttrs)
    if (from.attrs.count(name)) to->attrs[std::string(prefix) + name] = from.attrs.at(name);
  if (std::string(prefix) == "dw_")
    for (const char* name : kWindowAttrs)
      if (from.attrs.count(name)) to->attrs[std::string(prefix) + name] = from.attrs.at(name);
}

// Folds expansion `ex` into `host` (the projection that took the depthwise, or the depthwise itself): the
// host reads ex's input, takes its weights and bias as stage kFloatExpansion and its epilogue as "ex_" attributes.
void take_expansion(Matcher& m, Node* ex, Node* host) {
  m.rewire_input(*host, 0, ex->inputs[0]);
  add_stage(*host, Stage::kFloatExpansion, {ex->inputs[1], ex->has_input(2) ? ex->inputs[2] : ""});
  copy_attrs(*ex, host, "ex_");
  note_fused_before(*host, label_with_fused(*ex));
  m.kill(ex);
}

// The 1x1 expansion that makes `value` for the depthwise `dw` alone, or null.
Node* expansion_of(Graph& g, const Matcher& m, const std::string& value, const Node& dw) {
  if (m.sole_reader(value) != &dw) return nullptr;
  for (Node& n : g.nodes) {
    if (n.outputs.empty() || n.outputs[0] != value) continue;
    ConvGeometry cg;
    const bool plain = is_internal_op(&n, "NhwcConv") && geometry(g, n, &cg) && cg.is_pointwise() &&
                       unit_stages(n).empty() && !n.has_attr("algorithm");
    return plain ? &n : nullptr;
  }
  return nullptr;
}

}  // namespace

// A 3x3 stride-2 band of output rows reads its own input rows (one shared), so always; otherwise each run of
// bands remakes the rows it shares with the one before (kh - 1 at stride 1, kh - 2 at stride 2), and small images
// (MobileNetV2's 14x14 and 7x7 blocks, MobileNetV3's and EfficientNet's 14x14 5x5 stride-2 ones) ran faster
// apart, their expansion one larger GEMM: only from 28x28 on.
bool expansion_fold_pays(const Graph& g, const Node& dw, const ConvGeometry& d) {
  if (d.win.strides == std::vector<int64_t>{2, 2} && d.wshape[2] <= 3) return true;
  const ValueInfo* v = g.value(dw.inputs[0]);
  return v && v->has_shape && v->shape.size() == 4 && v->shape[1] > 0 && v->shape[2] > 0 && v->shape[1] * v->shape[2] >= 28 * 28;
}

size_t fold_depthwise_into_pointwise(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& dw : g.nodes) {
    ConvGeometry d, p;
    if (!is_internal_op(&dw, "NhwcConv") || !geometry(g, dw, &d)) continue;
    if (d.cin_g != 1 || d.cout != d.group || !unit_stages(dw).empty() || dw.has_attr("algorithm")) continue;
    Node* pw = const_cast<Node*>(m.sole_reader(dw.outputs[0]));
    if (!is_internal_op(pw, "NhwcConv") || pw->inputs[0] != dw.outputs[0] || !geometry(g, *pw, &p)) continue;
    if (!p.is_pointwise() || pw->has_attr("algorithm") || has_stage(*pw, Stage::kFloatDepthwise) ||
        has_stage(*pw, Stage::kChannelScale)) {
      ctx.refuse("depthwise_pointwise", dw, "its reader " + pw->label() + " is not a 1x1 convolution of stride 1 without padding");
      continue;
    }
    Node* ex = expansion_fold_pays(g, dw, d) ? expansion_of(g, m, dw.inputs[0], dw) : nullptr;  // before pw reads dw's input
    m.rewire_input(*pw, 0, dw.inputs[0]);
    add_stage(*pw, Stage::kFloatDepthwise, {dw.inputs[1], dw.has_input(2) ? dw.inputs[2] : ""});  // after its residual, if any
    copy_attrs(dw, pw, "dw_");
    Attr group;  // always set: the depthwise's group for its geometry (DepthwiseStage)
    group.type = ORT_OP_ATTR_INT;
    group.i = d.group;
    pw->attrs["dw_group"] = group;
    note_fused_before(*pw, label_with_fused(dw));
    if (ex) take_expansion(m, ex, pw);
    m.kill(&dw);
    ++folded;
  }
  commit_folds(g, m, folded);
  // A depthwise whose output other nodes read too (a squeeze-excite's pool and gate) takes its expansion
  // itself: the expanded tensor is still never stored.
  Matcher m2(g, ctx.outputs);
  size_t expanded = 0;
  for (Node& dw : g.nodes) {
    ConvGeometry d;
    if (!is_internal_op(&dw, "NhwcConv") || !geometry(g, dw, &d) || d.cin_g != 1 || d.cout != d.group || d.spatial != 2) continue;
    if (!unit_stages(dw).empty() || dw.has_attr("algorithm")) continue;
    Node* ex = expansion_fold_pays(g, dw, d) ? expansion_of(g, m2, dw.inputs[0], dw) : nullptr;
    if (!ex) continue;
    take_expansion(m2, ex, &dw);
    ++expanded;
    // Its squeeze-excite's global average pool: summed from each band while it is in cache (a second
    // output) instead of reading the whole output again.
    for (Node& gap : g.nodes) {
      if (!is_internal_op(&gap, "NhwcGlobalAveragePool") || gap.inputs.empty() ||
          gap.inputs[0] != dw.outputs[0] || m2.dead().count(static_cast<size_t>(&gap - g.nodes.data())))
        continue;
      dw.outputs.push_back(gap.outputs[0]);
      note_fused_after(dw, gap.label());
      m2.kill(&gap);
      break;
    }
  }
  return folded + commit_folds(g, m2, expanded);
}

}  // namespace optim
