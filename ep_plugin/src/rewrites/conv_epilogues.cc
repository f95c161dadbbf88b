// Folds what follows a float channels-last convolution into its epilogue (ops/conv_nhwc_op.cc):
//   NhwcConv -> Add(other of the same shape) -> Relu | Clip(constant bounds) -> HardSwish | HardSigmoid |
//   LeakyRelu | SiLU
// becomes one NhwcConv with `other` as its residual input (input 3), activation_min / activation_max and
// activation (+ activation_alpha / _beta), so the sum, clamp and activation happen while the outputs are
// still in registers. Runs after to_channels_last (and activation_fusion, which makes the SiLUs). An NCHW
// Conv (channels_last=0, or kept NCHW for its groups) takes a following Relu the same way.
#include "rewrite.h"

#include <algorithm>
#include <limits>
#include <set>

#include "../graph_matcher.h"
#include "../ops/qgemm.h"

namespace optim {
namespace {

// Clip's bounds when they are known constants (attributes before opset 11, scalar inputs after).
bool clip_bounds(const Graph& g, const Node& clip, float* lo, float* hi) {
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (clip.since_version < 11) {
    *lo = clip.attr_f("min", *lo);
    *hi = clip.attr_f("max", *hi);
    return true;
  }
  for (size_t k = 1; k <= 2; ++k) {
    if (!clip.has_input(k)) continue;
    const Tensor* t = g.constant(clip.inputs[k]);
    if (!t || t->dtype != DType::kFloat32 || t->numel() != 1) return false;
    (k == 1 ? *lo : *hi) = t->data<float>()[0];
  }
  return true;
}

// Whether `value` is computed from `from` (then reading it earlier would make a cycle).
bool depends_on(const Graph& g, const std::string& value, const std::string& from) {
  std::set<std::string> seen;
  std::vector<std::string> stack{value};
  while (!stack.empty()) {
    const std::string v = stack.back();
    stack.pop_back();
    if (v == from) return true;
    if (!seen.insert(v).second) continue;
    for (const Node& n : g.nodes)
      if (std::find(n.outputs.begin(), n.outputs.end(), v) != n.outputs.end())
        for (const auto& in : n.inputs)
          if (!in.empty()) stack.push_back(in);
  }
  return false;
}

// When `act` is an activation the epilogue runs, sets conv's activation attributes for it.
bool activation_attrs(const Node& act, Node* conv) {
  const bool silu = is_internal_op(&act, "Silu");
  if (!silu && !is_onnx_op(&act, "HardSwish") && !is_onnx_op(&act, "HardSigmoid") && !is_onnx_op(&act, "LeakyRelu")) return false;
  conv->set_attr_s("activation", act.op);
  if (act.op == "LeakyRelu") {
    conv->set_attr_f("activation_alpha", act.attr_f("alpha", 0.01f));
  } else if (!silu) {  // HardSwish carries the HardSigmoid's parameters when fused from x * HardSigmoid(x)
    const bool swish = act.op == "HardSwish";
    conv->set_attr_f("activation_alpha", act.attr_f("alpha", swish ? 1.f / 6.f : 0.2f));
    conv->set_attr_f("activation_beta", act.attr_f("beta", 0.5f));
  }
  return true;
}

// `next` becomes part of conv's step: conv writes its output, the step's label names it (Plan).
void fold(Node& conv, const Node& next, Matcher& m, Graph& g) {
  note_fused_after(conv, next.label());
  conv.outputs[0] = next.outputs[0];
  m.kill(&next);
  std::vector<Node> none;
  commit_rewrites(g, m, none);
}

}  // namespace

size_t fuse_conv_epilogues(Graph& g, RewriteContext& ctx) {
  const std::vector<std::string>& outputs = ctx.outputs;
  size_t folded = 0;
  for (bool changed = true; changed;) {
    changed = false;
    Matcher m(g, outputs);
    for (Node& conv : g.nodes) {
      // An NCHW Conv (kept so by the option or for its groups) takes a following Relu into its epilogue.
      if (is_onnx_op(&conv, "Conv") && !conv.has_attr("activation_min")) {
        const Node* relu = m.sole_reader(conv.outputs[0]);
        if (!is_onnx_op(relu, "Relu")) continue;
        conv.set_attr_f("activation_min", 0.f);
        fold(conv, *relu, m, g);
        ++folded;
        changed = true;
        break;  // the node vector moved: look again
      }
      if (!is_internal_op(&conv, "NhwcConv")) continue;
      const Node* next = m.sole_reader(conv.outputs[0]);
      if (!next) continue;
      const float inf = std::numeric_limits<float>::infinity();
      const float lo = conv.attr_f("activation_min", -inf), hi = conv.attr_f("activation_max", inf);
      const bool plain = lo == -inf && hi == inf && !conv.has_attr("activation");
      if (is_onnx_op(next, "Add") && plain && unit_stages(conv).empty() && next->inputs.size() == 2) {
        const std::string& other = next->inputs[0] == conv.outputs[0] ? next->inputs[1] : next->inputs[0];
        const ValueInfo* a = g.value(conv.outputs[0]);
        const ValueInfo* b = g.value(other);
        const ValueInfo* y = g.value(next->outputs[0]);
        // The same static shape (unknown dims in the same places; at run time a residual that only
        // broadcasts into the output still works, see NhwcConv).
        const bool same = a && b && y && a->has_shape && b->has_shape && a->shape == b->shape && y->has_shape &&
                          y->shape == a->shape && b->dtype == DType::kFloat32;
        if (!same || other == conv.outputs[0] || depends_on(g, other, conv.outputs[0])) {
          ctx.refuse("conv_epilogues", *next, "its other operand does not have the convolution's shape, or comes from it");
          continue;
        }
        add_stage(conv, Stage::kResidual, {other});
      } else if (!conv.has_attr("activation") && activation_attrs(*next, &conv)) {
        // HardSwish, HardSigmoid, LeakyRelu, SiLU after the clamp (set above when Relu/Clip came first).
      } else if (conv.has_attr("activation")) {
        continue;  // nothing folds in after an activation
      } else if (is_onnx_op(next, "Relu")) {
        conv.set_attr_f("activation_min", std::max(lo, 0.f));
      } else if (is_onnx_op(next, "Clip")) {
        float clo = 0.f, chi = 0.f;
        if (!clip_bounds(g, *next, &clo, &chi)) continue;
        conv.set_attr_f("activation_min", std::max(lo, clo));
        conv.set_attr_f("activation_max", std::min(hi, chi));
      } else {
        continue;
      }
      fold(conv, *next, m, g);
      ++folded;
      changed = true;
      break;  // the node vector moved: look again
    }
  }
  return folded;
}

}  // namespace optim
