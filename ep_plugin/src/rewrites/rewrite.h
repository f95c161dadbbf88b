// The graph rewrites OptimEP makes inside a partition before its plan is built, in one ordered list
// (rewrite_list.cc). Each takes the partition's graph and a RewriteContext, returns how many places it
// rewrote, and says for each candidate it looked at and left alone why (the placement report's
// "rewrites", `optim run -v`). A rewrite never changes what the partition computes, only how: integer
// units for QDQ patterns, fused activations, channels-last layout, tables for quantized element-wise regions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../../kernels/kernel_table.h"
#include "../ir.h"
#include "../ops/conv_common.h"
#include "../ops/op.h"  // kInternalDomain
#include "../ops/qgemm.h"

namespace optim {

struct RewriteContext {
  std::vector<std::string> outputs;  // the partition's outputs: values every rewrite keeps
  const kernels::KernelTable* kernels = nullptr;  // what the plan will run with
  bool channels_last = true;                      // EP option channels_last
  bool winograd = true;                           // EP option winograd
  // "rewrite: Op 'node': reason" for each candidate a rewrite left as it was.
  std::vector<std::string> refusals;
  std::map<std::string, size_t> applied;  // rewrite name -> places rewritten

  void refuse(const char* rewrite, const Node& n, const std::string& why) {
    refusals.push_back(std::string(rewrite) + ": " + n.label() + ": " + why);
  }
};

// Whether `value` is known to have element type t.
inline bool has_dtype(const Graph& g, const std::string& value, DType t) {
  const ValueInfo* v = g.value(value);
  return v && v->dtype == t;
}
// The value of `name` when it is a float32 scalar constant (gelu.cc, group_attention.cc).
inline bool float_scalar_constant(const Graph& g, const std::string& name, float* value) {
  const Tensor* t = g.constant(name);
  if (!t || t->dtype != DType::kFloat32 || t->numel() != 1) return false;
  *value = t->data<float>()[0];
  return true;
}
// The int64 values of constant `name`, or empty (group_attention.cc, rotary.cc).
inline std::vector<int64_t> int64_constant(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.constant(name);
  if (!t || t->dtype != DType::kInt64) return {};
  return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + t->numel());
}
// The float32 scalar constant among binary node n's inputs, and the other input (gelu.cc, qdq_softmax.cc).
inline bool scalar_operand(const Graph& g, const Node& n, float* value, std::string* other) {
  if (n.inputs.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (float_scalar_constant(g, n.inputs[i], value)) {
      *other = n.inputs[1 - i];
      return true;
    }
  }
  return false;
}
// The other input of binary node n when one input is `x`, else "" (rms_norm.cc, rotary.cc).
inline std::string other_input(const Node& n, const std::string& x) {
  if (n.inputs.size() != 2) return "";
  return n.inputs[0] == x ? n.inputs[1] : n.inputs[1] == x ? n.inputs[0] : "";
}
// The static size of value's last dim, or -1.
inline int64_t last_dim(const Graph& g, const std::string& value) {
  const ValueInfo* v = g.value(value);
  return v && v->has_shape && !v->shape.empty() ? v->shape.back() : -1;
}
// Whether n is one of OptimEP's own ops of that type (domain optim.internal: units, channels-last forms).
inline bool is_internal_op(const Node* n, const char* op) { return n && n->domain == kInternalDomain && n->op == op; }

// The name of `add`'s bias operand (the one that is not `x`) when it is a float32 constant of n values along
// the last axis only, with rank at most `rank` (0: the output's rank unknown, then only [N]), so the Add keeps
// x's shape; else empty. (matmul_bias.cc; dequantize_fold.cc uses it too.)
std::string column_bias(const Graph& g, const Node& add, const std::string& x, int64_t n, size_t rank);

// Whether folding the 1x1 expansion before depthwise convolution `dw` (geometry d) into one pass with it pays
// (depthwise_pointwise.cc; qdepthwise_block.cc uses the same rule for int8).
bool expansion_fold_pays(const Graph& g, const Node& dw, const ConvGeometry& d);
// What a folded node brings to its host's step label (fused_labels.cc): its own label and what it had folded in,
// recorded as running after the host's node (attribute "fused") or before it ("fused_before", ahead of what is
// there already).
std::string label_with_fused(const Node& n);
void note_fused_after(Node& host, const std::string& label);
void note_fused_before(Node& host, const std::string& label);
using RewriteFn = size_t (*)(Graph& g, RewriteContext& ctx);

struct Rewrite {
  const char* name;
  RewriteFn run;
  // The rewrites that must have run before this one, each with why (rewrite_list.cc checks the list against them).
  std::vector<std::pair<const char*, const char*>> after = {};
};

// Every rewrite, in an order that keeps every one's `after` (checked when the list is first built: Error names the
// rewrite and the one it must follow).
const std::vector<Rewrite>& rewrite_list();

// Runs the list on g; ctx.applied and ctx.refusals say what happened.
void run_rewrites(Graph& g, RewriteContext& ctx);

// The rewrites themselves, one file each.
size_t keep_quantized_through_data_movement(Graph& g, RewriteContext& ctx);  // quantized_data_movement.cc
size_t quantize_concat_inputs(Graph& g, RewriteContext& ctx);                // qdq_concat.cc
size_t fuse_qdq_units(Graph& g, RewriteContext& ctx);                        // qdq_units.cc
size_t fuse_qdq_adds(Graph& g, RewriteContext& ctx);                         // qdq_binary.cc
size_t fuse_qdq_softmax(Graph& g, RewriteContext& ctx);                      // qdq_softmax.cc
size_t fuse_qdq_muls(Graph& g, RewriteContext& ctx);                         // qdq_binary.cc
size_t fold_constant_dequantize(Graph& g, RewriteContext& ctx);              // constant_dequantize.cc
size_t fuse_gelu(Graph& g, RewriteContext& ctx);                             // gelu.cc
size_t fuse_activations(Graph& g, RewriteContext& ctx);                      // activations.cc
size_t fold_qdq_lookup_tables(Graph& g, RewriteContext& ctx);                // qdq_lookup_tables.cc
size_t to_channels_last(Graph& g, RewriteContext& ctx);                      // channels_last.cc
size_t fuse_conv_epilogues(Graph& g, RewriteContext& ctx);                   // conv_epilogues.cc
size_t fold_depthwise_into_pointwise(Graph& g, RewriteContext& ctx);         // depthwise_pointwise.cc
size_t fold_qdepthwise_blocks(Graph& g, RewriteContext& ctx);                // qdepthwise_block.cc
size_t fold_gates_into_units(Graph& g, RewriteContext& ctx);                 // gate_fold.cc
size_t fold_channel_scales(Graph& g, RewriteContext& ctx);                   // channel_scales.cc
size_t choose_winograd(Graph& g, RewriteContext& ctx);                       // winograd.cc
size_t fuse_matmul_bias(Graph& g, RewriteContext& ctx);                      // matmul_bias.cc
size_t read_nchw_in_stems(Graph& g, RewriteContext& ctx);                    // nchw_stem.cc
size_t fold_qadds_into_units(Graph& g, RewriteContext& ctx);                 // qadd_fold.cc
size_t fold_luts_into_units(Graph& g, RewriteContext& ctx);                  // lut_fold.cc
size_t fold_dequantize_into_pools(Graph& g, RewriteContext& ctx);            // dequantize_pool.cc
size_t fold_dequantize_into_gemms(Graph& g, RewriteContext& ctx);            // dequantize_fold.cc
size_t view_tokens_as_maps(Graph& g, RewriteContext& ctx);                   // token_grid.cc
size_t fuse_group_attention(Graph& g, RewriteContext& ctx);                  // group_attention.cc
size_t group_matmul_nbits_siblings(Graph& g, RewriteContext& ctx);           // matmul_nbits_siblings.cc
size_t fuse_rms_norm(Graph& g, RewriteContext& ctx);                         // rms_norm.cc
size_t fuse_rotary(Graph& g, RewriteContext& ctx);                           // rotary.cc

}  // namespace optim
