// The table of every op OptimEP implements, and the claim-time check that consults it.
#include <algorithm>

#include "op.h"
#include "qgemm.h"

namespace optim {

std::vector<OpDef> cast_op_defs();
std::vector<OpDef> conv_op_defs();
std::vector<OpDef> conv_transpose_op_defs();
std::vector<OpDef> elementwise_op_defs();
std::vector<OpDef> gather_indexed_op_defs();
std::vector<OpDef> indexing_op_defs();
std::vector<OpDef> logical_op_defs();
std::vector<OpDef> math_op_defs();
std::vector<OpDef> matmul_op_defs();
std::vector<OpDef> matmul_nbits_op_defs();
std::vector<OpDef> normalization_op_defs();
std::vector<OpDef> pad_op_defs();
std::vector<OpDef> pool_op_defs();
std::vector<OpDef> quantize_op_defs();
std::vector<OpDef> reduce_op_defs();
std::vector<OpDef> resize_op_defs();
std::vector<OpDef> rnn_op_defs();
std::vector<OpDef> scatter_nd_op_defs();
std::vector<OpDef> shape_op_defs();
std::vector<OpDef> shape_source_op_defs();
std::vector<OpDef> slice_op_defs();
std::vector<OpDef> split_tile_op_defs();
std::unique_ptr<Op> create_internal_op(const Node& node, const Graph& graph);  // internal_ops.cc

const std::vector<OpDef>& op_registry() {
  static const std::vector<OpDef> all = [] {
    std::vector<OpDef> v;
    for (auto part : {cast_op_defs, conv_op_defs, conv_transpose_op_defs, elementwise_op_defs, gather_indexed_op_defs,
                      indexing_op_defs, logical_op_defs, math_op_defs, matmul_op_defs, matmul_nbits_op_defs,
                      normalization_op_defs,
                      pad_op_defs, pool_op_defs, quantize_op_defs, reduce_op_defs, resize_op_defs, rnn_op_defs,
                      scatter_nd_op_defs, shape_op_defs, shape_source_op_defs,
                      slice_op_defs, split_tile_op_defs}) {
      for (const OpDef& d : part()) v.push_back(d);
    }
    return v;
  }();
  return all;
}

namespace {

bool onnx_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

const OpDef* find_def(const Node& node) {
  for (const OpDef& d : op_registry())
    if (node.op == d.op_type && (onnx_domain(node.domain) ? *d.domain == '\0' : node.domain == d.domain)) return &d;
  return nullptr;
}

}  // namespace

std::string why_unsupported(const Node& node, const Graph& graph) {
  const OpDef* def = find_def(node);
  if (!def && !onnx_domain(node.domain)) return "op " + node.domain + "::" + node.op + " is not implemented by OptimEP";
  if (!def) return "op " + node.op + " is not implemented by OptimEP";
  if (node.since_version < def->min_opset || node.since_version > def->max_opset)
    return node.op + " opset " + std::to_string(node.since_version) + " is outside the implemented range " +
           std::to_string(def->min_opset) + "-" + std::to_string(def->max_opset);
  try {
    return def->check(node, graph);
  } catch (const std::exception& e) {
    return std::string("attributes not understood: ") + e.what();
  }
}

std::vector<size_t> resize_shape_inputs(const Node& node);  // resize.cc

std::vector<size_t> shape_value_inputs(const Node& node) {
  if (node.domain == kInternalDomain && (node.op == "NhwcResize" || node.op == "QResize" || node.op == "NhwcQResize"))
    return resize_shape_inputs(node);
  if (node.domain == kInternalDomain && node.op == "GroupAttention") return {4, 5, 6, 7, 8};  // repeats, length
  const OpDef* def = onnx_domain(node.domain) ? find_def(node) : nullptr;
  return def && def->shape_inputs ? def->shape_inputs(node) : std::vector<size_t>{};
}

std::unique_ptr<Op> create_op(const Node& node, const Graph& graph) {
  if (node.domain == kInternalDomain) return create_internal_op(node, graph);
  const std::string why = why_unsupported(node, graph);
  if (!why.empty()) throw Error(why);
  return find_def(node)->create(node, graph);
}

std::string require_float(const Graph& g, const Node& n, size_t input_index) {
  if (!n.has_input(input_index)) return "";
  const ValueInfo* v = g.value(n.inputs[input_index]);
  if (!v || v->dtype == DType::kFloat32) return "";
  return std::string("input '") + n.inputs[input_index] + "' is " + dtype_name(v->dtype) + " (OptimEP's " + n.op +
         " runs float32)";
}

std::string require_float_inputs(const Graph& g, const Node& n) {
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    std::string r = require_float(g, n, i);
    if (!r.empty()) return r;
  }
  return "";
}

std::string require_fixed_size(const Graph& g, const Node& n, size_t input_index) {
  if (!n.has_input(input_index)) return "";
  const ValueInfo* v = g.value(n.inputs[input_index]);
  if (!v || (dtype_size(v->dtype) > 0 && v->dtype != DType::kString)) return "";
  return std::string("input '") + n.inputs[input_index] + "' is " + dtype_name(v->dtype) + " (OptimEP's " + n.op +
         " moves fixed-size elements)";
}

std::string require_indices_and_data(const Graph& g, const Node& n) {
  const ValueInfo* idx = g.value(n.inputs[1]);
  if (idx && idx->dtype != DType::kInt64 && idx->dtype != DType::kInt32)
    return "indices '" + n.inputs[1] + "' are " + dtype_name(idx->dtype) + ", not int64 or int32";
  return require_fixed_size(g, n, 0);
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw Error(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace optim
