// Folds int8 MobileNet blocks into one NhwcQConv (ops/qconv_block.h): a depthwise unit into the 1x1 unit that
// alone reads it (the projection, its residual QAdd already folded in), and the 1x1 expansion that alone feeds
// the depthwise where that pays (the float rule: depthwise_pointwise.cc); a depthwise whose output others read
// too (a squeeze-excite) takes only its expansion. Every value inside the block, and its output, must be uint8
// (the block converts the expanded rows for the depthwise kernel from uint8), and the depthwise have at most 64
// taps: then its float32 sums, of |x - zx| <= 255 times |w - zw| <= 255, stay exact. Runs after qadd_fold.
#include "rewrite.h"

#include "../graph_matcher.h"
#include "../ops/conv_common.h"
#include "../ops/qconv_block.h"

namespace optim {

namespace {

constexpr int64_t kMaxExactTaps = 64;

// The geometry of a plain NhwcQConv unit (not a block yet) with constant 4-D weights and uint8 input and
// output, or false.
bool unit_geometry(const Graph& g, const Node* n, ConvGeometry* cg) {
  if (!is_internal_op(n, "NhwcQConv") || is_qconv_block(*n) || n->outputs.empty()) return false;
  const Tensor* w = n->has_input(kQGemmW) ? g.constant(n->inputs[kQGemmW]) : nullptr;
  if (!w || w->shape.size() != 4 || !has_dtype(g, n->inputs[kQGemmX], DType::kUint8) ||
      !has_dtype(g, n->outputs[0], DType::kUint8))
    return false;
  *cg = ConvGeometry(*n, w->shape);
  return true;
}

bool is_depthwise(const ConvGeometry& d) { return d.cin_g == 1 && d.cout == d.group && d.spatial == 2; }

// Moves unit's parameters (inputs after x) to host's stage `stage` and its attributes under `prefix`.
void take_unit(Matcher& m, Node* unit, Node* host, Stage stage, const std::string& prefix) {
  std::vector<std::string> params;
  for (size_t i = 0; i < kUnitStageInputs; ++i) params.push_back(unit->has_input(1 + i) ? unit->inputs[1 + i] : "");
  add_stage(*host, stage, params);
  for (const auto& [name, a] : unit->attrs)
    if (name != "fused") host->attrs[prefix + name] = a;
  host->set_attr_s(prefix + "name", unit->name);
  note_fused_before(*host, label_with_fused(*unit));
  m.kill(unit);
}

// The 1x1 expansion unit that makes the depthwise `dw`'s input for it alone, when folding it pays, or null.
Node* expansion_of(Graph& g, const Matcher& m, Node& dw, const ConvGeometry& d, RewriteContext& ctx) {
  Node* ex = const_cast<Node*>(m.producer(dw.inputs[kQGemmX]));
  ConvGeometry e;
  if (!unit_geometry(g, ex, &e) || !e.is_pointwise() || has_stage(*ex, Stage::kAdd) || m.sole_reader(dw.inputs[kQGemmX]) != &dw)
    return nullptr;
  if (!expansion_fold_pays(g, dw, d)) {
    ctx.refuse("qdepthwise_block", *ex, "its depthwise's image is small enough that the expansion runs faster as one GEMM");
    return nullptr;
  }
  return ex;
}

}  // namespace

size_t fold_qdepthwise_blocks(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  size_t folded = 0;
  for (Node& dw : g.nodes) {
    ConvGeometry d;
    if (m.dead().count(m.index_of(&dw)) || !unit_geometry(g, &dw, &d) || !is_depthwise(d)) continue;
    if (has_stage(dw, Stage::kAdd)) {
      ctx.refuse("qdepthwise_block", dw, "a QAdd is folded into it");
      continue;
    }
    if (d.wshape[2] * d.wshape[3] > kMaxExactTaps) {
      ctx.refuse("qdepthwise_block", dw, "its kernel has more than 64 taps: float32 sums of a band might not be exact");
      continue;
    }
    Node* pw = const_cast<Node*>(m.sole_reader(dw.outputs[0]));
    ConvGeometry p;
    const bool projection = unit_geometry(g, pw, &p) && p.is_pointwise() && pw->inputs[kQGemmX] == dw.outputs[0];
    Node* ex = expansion_of(g, m, dw, d, ctx);
    if (!projection && !ex) continue;
    Node* host = projection ? pw : &dw;
    if (ex) m.rewire_input(*host, kQGemmX, ex->inputs[kQGemmX]);
    else m.rewire_input(*host, kQGemmX, dw.inputs[kQGemmX]);
    if (projection) {
      take_unit(m, &dw, host, Stage::kDepthwise, "dw_");
      host->set_attr_i("dw_group", d.group);  // the mark of the fold, set even where the depthwise's group is 1
    }
    if (ex) take_unit(m, ex, host, Stage::kExpansion, "ex_");
    ++folded;
  }
  return commit_folds(g, m, folded);
}

}  // namespace optim
