// The channels-last rewrite: inside a partition, convolutions run on [N, H, W, C] tensors (ops/conv_nhwc.h),
// and so do the ops around them that do not care about the layout (element-wise ops, Concat, pooling,
// Quantize/DequantizeLinear per tensor), so that the layout changes only at the region's edges:
//   x -> ToNhwc -> NhwcConv -> Relu -> NhwcMaxPool -> NhwcQConv ... -> ToNchw -> (partition output, or an
//   op that needs NCHW: Reshape, Flatten, Gemm...)
// Partition inputs and outputs keep ONNX's NCHW layout. Constants read by moved ops are re-laid once here.
#include "rewrite.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "../ops/qgemm.h"

namespace optim {
namespace {

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Element-wise ops with one data input (input 0); any other inputs must be scalars (Clip's bounds, the
// quantization parameters of a per-tensor Quantize/DequantizeLinear).
const std::set<std::string>& unary_ops() {
  static const std::set<std::string> ops = {"Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg", "Abs", "Gelu", "Clip",
                                            "HardSigmoid", "HardSwish", "LeakyRelu", "Identity", "Cast", "Softplus",
                                            "Reciprocal", "QuantizeLinear", "DequantizeLinear"};
  return ops;
}
// Element-wise ops over all their inputs with numpy broadcasting.
const std::set<std::string>& binary_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  return ops;
}
// Pooling ops and their channels-last forms.
const std::map<std::string, std::string>& pool_ops() {
  static const std::map<std::string, std::string> ops = {{"MaxPool", "NhwcMaxPool"},
                                                         {"AveragePool", "NhwcAveragePool"},
                                                         {"GlobalAveragePool", "NhwcGlobalAveragePool"},
                                                         {"GlobalMaxPool", "NhwcGlobalMaxPool"}};
  return ops;
}

// Reductions over listed axes; with keepdims they keep the rank, so their axes can be re-laid.
const std::set<std::string>& reduce_ops() {
  static const std::set<std::string> ops = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1",
                                            "ReduceL2", "ReduceSumSquare"};
  return ops;
}

// The NHWC position of NCHW axis `axis` (negative allowed) at rank r.
int64_t nhwc_axis(int64_t axis, int64_t r) {
  if (axis < 0) axis += r;
  return axis == 0 ? 0 : axis == 1 ? r - 1 : axis - 1;
}

// Whether `perm` moves channels last ([0, 2, ..., r-1, 1]) or first ([0, r-1, 1, ..., r-2]).
bool perm_is(const std::vector<int64_t>& perm, bool channels_last) {
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 3 || perm[0] != 0) return false;
  for (int64_t i = 1; i < r; ++i) {
    const int64_t want = channels_last ? (i == r - 1 ? 1 : i + 1) : (i == 1 ? r - 1 : i - 1);
    if (perm[static_cast<size_t>(i)] != want) return false;
  }
  return true;
}

// NCHW shape -> NHWC shape (channels moved last).
Shape nhwc_shape(const Shape& s) {
  Shape out = s;
  out.erase(out.begin() + 1);
  out.push_back(s[1]);
  return out;
}

// A constant broadcast against rank-r NCHW tensors, re-laid for their NHWC forms: its shape padded to rank
// r with leading 1s, then channels moved last.
Tensor constant_to_nhwc(const Tensor& t, size_t r) {
  Shape padded(r - t.shape.size(), 1);
  padded.insert(padded.end(), t.shape.begin(), t.shape.end());
  Tensor out;
  out.dtype = t.dtype;
  out.shape = nhwc_shape(padded);
  out.bytes.resize(t.bytes.size());
  const size_t elem = dtype_size(t.dtype);
  const int64_t n = shape_numel(padded);
  // Output element (NHWC index) -> input element (NCHW index), dims visited last to first.
  std::vector<int64_t> in_stride(r, 1);
  for (size_t d = r - 1; d > 0; --d) in_stride[d - 1] = in_stride[d] * padded[d];
  std::vector<size_t> perm(r);  // nhwc dim i holds nchw dim perm[i]
  perm[0] = 0;
  for (size_t i = 1; i + 1 < r; ++i) perm[i] = i + 1;
  perm[r - 1] = 1;
  for (int64_t o = 0; o < n; ++o) {
    int64_t rest = o, src = 0;
    for (size_t i = r; i-- > 0;) {
      const int64_t dim = out.shape[i];
      src += rest % dim * in_stride[perm[i]];
      rest /= dim;
    }
    std::memcpy(out.bytes.data() + static_cast<size_t>(o) * elem, t.bytes.data() + static_cast<size_t>(src) * elem, elem);
  }
  return out;
}

struct LayoutReport {
  size_t convolutions = 0;    // Conv / QConv moved to channels last
  size_t moved = 0;           // other ops moved with them
  size_t layout_changes = 0;  // ToNhwc / ToNchw nodes left in the partition
};

class Rewriter {
 public:
  Rewriter(Graph& g, RewriteContext& ctx) : g_(g), ctx_(ctx), outputs_(ctx.outputs.begin(), ctx.outputs.end()) {}

  LayoutReport run() {
    dead_.assign(g_.nodes.size(), false);
    const size_t original = g_.nodes.size();
    for (size_t i = 0; i < original; ++i)
      if (seed(i)) ++report_.convolutions;
    if (report_.convolutions == 0) return report_;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < g_.nodes.size(); ++i) {
        if (dead_[i]) continue;
        if (reads_layout_change(g_.nodes[i]) && (cancel(i) || move(i))) changed = true;
        else if (pull(i)) changed = true;
      }
    }
    drop_unread_layout_changes();
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i]) {
        if (g_.nodes[i].domain == kInternalDomain && (g_.nodes[i].op == "ToNhwc" || g_.nodes[i].op == "ToNchw"))
          ++report_.layout_changes;
        kept.push_back(std::move(g_.nodes[i]));
      }
    g_.nodes = std::move(kept);
    return report_;
  }

 private:
  // --- the graph -------------------------------------------------------------------------------------
  const Node* producer(const std::string& v) const {
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i] && std::find(g_.nodes[i].outputs.begin(), g_.nodes[i].outputs.end(), v) != g_.nodes[i].outputs.end())
        return &g_.nodes[i];
    return nullptr;
  }
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t producer_index(const std::string& v) const {
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i] && std::find(g_.nodes[i].outputs.begin(), g_.nodes[i].outputs.end(), v) != g_.nodes[i].outputs.end())
        return i;
    return kNone;
  }
  std::vector<size_t> readers(const std::string& v) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i] && std::find(g_.nodes[i].inputs.begin(), g_.nodes[i].inputs.end(), v) != g_.nodes[i].inputs.end())
        out.push_back(i);
    return out;
  }
  std::string fresh(const std::string& base) {
    std::string name = base;
    while (g_.values.count(name) || g_.constants.count(name)) name = base + "_" + std::to_string(++counter_);
    return name;
  }
  const ValueInfo* info(const std::string& v) const { return g_.value(v); }
  size_t rank(const std::string& v) const {
    const ValueInfo* vi = info(v);
    return vi && vi->has_shape ? vi->shape.size() : 0;
  }
  // A new value: `nchw`'s dtype and its shape with channels moved last.
  std::string add_nhwc_value(const std::string& nchw) {
    const std::string name = fresh(nchw + "/nhwc");
    ValueInfo vi;
    vi.name = name;
    if (const ValueInfo* src = info(nchw)) {
      vi.dtype = src->dtype;
      vi.has_shape = src->has_shape;
      if (src->has_shape) vi.shape = nhwc_shape(src->shape);
    }
    g_.values[name] = vi;
    return name;
  }
  void add_node(Node n) {
    g_.nodes.push_back(std::move(n));
    dead_.push_back(false);
  }
  Node layout_node(const char* op, const std::string& in, const std::string& out) {
    Node n;
    n.name = out + "/" + op;
    n.op = op;
    n.domain = kInternalDomain;
    n.since_version = 1;
    n.inputs = {in};
    n.outputs = {out};
    return n;
  }
  static bool is_internal(const Node* n, const char* op) { return n && n->domain == kInternalDomain && n->op == op; }

  // The NHWC form of `v` when a ToNchw produced it, else "".
  std::string nhwc_source(const std::string& v) const {
    const Node* p = producer(v);
    return is_internal(p, "ToNchw") ? p->inputs[0] : "";
  }
  // The NHWC form of `v`, adding a ToNhwc if there is none yet. A Transpose that moved channels first
  // (a model's own channels-last block ending, as ConvNeXt writes) gives its input back.
  std::string nhwc_of(const std::string& v) {
    if (std::string s = nhwc_source(v); !s.empty()) return s;
    const Node* p = producer(v);
    if (p && is_onnx(*p) && p->op == "Transpose" && perm_is(p->attr_ints("perm"), false) && rank(p->inputs[0]) >= 3)
      return p->inputs[0];
    auto it = to_nhwc_.find(v);
    if (it != to_nhwc_.end()) return it->second;
    const std::string out = add_nhwc_value(v);
    add_node(layout_node("ToNhwc", v, out));
    to_nhwc_[v] = out;
    return out;
  }
  bool reads_layout_change(const Node& n) const {
    for (const auto& in : n.inputs)
      if (!in.empty() && !nhwc_source(in).empty()) return true;
    return false;
  }

  // --- seeds: convolutions ------------------------------------------------------------------------------
  bool seed(size_t i) {
    Node& n = g_.nodes[i];
    const bool conv = is_onnx(n) && n.op == "Conv", qconv = n.domain == kInternalDomain && n.op == "QConv";
    if ((!conv && !qconv) || n.outputs.size() != 1) return false;
    const size_t w_idx = conv ? size_t{1} : size_t{kQGemmW};
    const Tensor* w = g_.constant(n.inputs[w_idx]);
    if (!w || w->dtype == DType::kFloat64 || (conv && w->dtype != DType::kFloat32)) {
      ctx_.refuse("channels_last", n, "its weights are not a float32 or int8 constant");
      return false;
    }
    if ((w->shape.size() != 3 && w->shape.size() != 4) || rank(n.inputs[0]) != w->shape.size()) {
      ctx_.refuse("channels_last", n, "it is not a 1-D or 2-D convolution of an input of known rank");
      return false;
    }
    if (conv && n.has_input(2) && !g_.constant(n.inputs[2])) {
      ctx_.refuse("channels_last", n, "its bias is not a constant");
      return false;
    }
    // Grouped (not depthwise) convolutions with few output channels per group fill a fraction of the
    // channels-last GEMM's 16-wide panels; the NCHW direct kernels run them several times faster.
    const int64_t group = n.attr_i("group", 1), cout = w->shape[0];
    if (group > 1 && !(w->shape[1] == 1 && cout == group) && cout / group < 16) {
      ctx_.refuse("channels_last", n, "grouped with fewer than 16 output channels per group (the NCHW kernels run it faster)");
      return false;
    }
    const std::string y = n.outputs[0], y_nhwc = add_nhwc_value(y);
    const std::string x = nhwc_of(n.inputs[0]);  // may grow g_.nodes: `n` is stale from here
    Node& node = g_.nodes[i];
    node.op = conv ? "NhwcConv" : "NhwcQConv";
    node.domain = kInternalDomain;
    node.since_version = 1;
    node.inputs[0] = x;
    node.outputs[0] = y_nhwc;
    add_node(layout_node("ToNchw", y_nhwc, y));
    return true;
  }

  // --- cancellation: ToNhwc of a ToNchw output reads the NHWC value itself ----------------------------------
  bool cancel(size_t i) {
    const Node& n = g_.nodes[i];
    const bool transpose = is_onnx(n) && n.op == "Transpose" && perm_is(n.attr_ints("perm"), true);
    if (!is_internal(&n, "ToNhwc") && !transpose) return false;
    const std::string src = nhwc_source(n.inputs[0]), out = n.outputs[0];
    if (outputs_.count(out)) return false;  // a partition output keeps its producer
    for (size_t r : readers(out))
      for (auto& in : g_.nodes[r].inputs)
        if (in == out) in = src;
    for (auto& [k, v] : to_nhwc_)
      if (v == out) v = src;
    dead_[i] = true;
    return true;
  }

  // --- moving an op that reads a ToNchw output to channels last ---------------------------------------------
  // How an input of a moved op is read: its NHWC form, a re-laid constant, or as it is (a scalar).
  bool plan_input(const std::string& v, size_t r, std::string* replacement) {
    if (v.empty()) return true;
    if (std::string s = nhwc_source(v); !s.empty()) {
      if (rank(v) != r) return false;
      *replacement = s;
      return true;
    }
    const ValueInfo* vi = info(v);
    if (vi && vi->has_shape && shape_numel(vi->shape) == 1 && vi->shape.size() <= r) return true;  // a scalar
    return relay_constant(v, r, replacement);
  }
  // A constant read by an op moved to rank-r NHWC: its re-laid copy (false if `v` is no such constant).
  bool relay_constant(const std::string& v, size_t r, std::string* replacement) {
    const Tensor* t = g_.constant(v);
    if (!t || t->shape.size() > r) return false;
    const std::string name = fresh(v + "/nhwc");
    g_.constants[name] = constant_to_nhwc(*t, r);
    g_.values[name] = ValueInfo{name, t->dtype, true, g_.constants[name].shape, true};
    *replacement = name;
    return true;
  }

  // v's rank, where values ONNX Runtime left without a shape (Quantize/DequantizeLinear outputs, its copies
  // of a shared DequantizeLinear) take it from the one data input of the element-wise ops that made them.
  size_t element_wise_rank(std::string v) const {
    for (int hops = 0; hops < 16 && !rank(v); ++hops) {
      const size_t pi = producer_index(v);
      std::vector<size_t> data;
      if (pi == kNone || !data_inputs(g_.nodes[pi], &data) || data.size() != 1 || pool_ops().count(g_.nodes[pi].op)) return 0;
      v = g_.nodes[pi].inputs[data[0]];
    }
    return rank(v);
  }

  // --- pulling a layout change upstream -----------------------------------------------------------------
  // ToNhwc(op(a, b...)) -> op_nhwc(ToNhwc(a), ToNhwc(b)...) when a layout-free op's only reader is the
  // layout change: the region grows towards its inputs (a decoder's Concat of upsampled features, the
  // Quantize/DequantizeLinear around them), and the change lands on the smaller tensors before an
  // upsampling, or on a view (nhwc_of) where the model's own layout already is channels last.
  bool pull(size_t t) {
    if (!is_internal(&g_.nodes[t], "ToNhwc")) return false;
    const std::string v = g_.nodes[t].inputs[0], v_nhwc = g_.nodes[t].outputs[0];
    if (outputs_.count(v) || readers(v).size() != 1) return false;
    const size_t pi = producer_index(v);
    if (pi == kNone || g_.nodes[pi].outputs.size() != 1) return false;
    std::vector<size_t> data;
    if (!data_inputs(g_.nodes[pi], &data)) return false;
    const Node& n = g_.nodes[pi];
    const size_t r = element_wise_rank(v);
    if (r < 3) return false;
    std::vector<std::string> replaced(n.inputs.size());
    std::vector<size_t> to_convert;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (std::find(data.begin(), data.end(), k) == data.end()) {
        if (!keeps_input(n, k)) return false;
        continue;
      }
      const std::string& in = n.inputs[k];
      const ValueInfo* vi = info(in);
      if (in.empty() || (vi && vi->has_shape && shape_numel(vi->shape) == 1 && vi->shape.size() <= r)) continue;
      if (g_.constant(in)) {
        if (!relay_constant(in, r, &replaced[k])) return false;
      } else if (element_wise_rank(in) == r) {
        if (costs_more(in, v) && !region_continues_at(in)) return false;
        to_convert.push_back(k);
      } else {
        return false;  // broadcasting from a lower rank: its NHWC form is no plain layout change
      }
    }
    for (size_t k : to_convert) replaced[k] = nhwc_of(g_.nodes[pi].inputs[k]);  // may grow g_.nodes
    Node& node = g_.nodes[pi];
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (!replaced[k].empty()) node.inputs[k] = replaced[k];
    relabel(pi, r);
    node.outputs[0] = v_nhwc;
    dead_[t] = true;
    to_nhwc_.erase(v);
    ++report_.moved;
    return true;
  }

  // Whether a layout change on `in` moves more bytes than one on `v`: a QuantizeLinear's float input is 4x its
  // output, a pool's input is larger than its output. Unknown sizes count as equal.
  bool costs_more(const std::string& in, const std::string& v) const {
    const ValueInfo *a = info(in), *b = info(v);
    if (!a || !b) return false;
    const size_t ea = dtype_size(a->dtype), eb = dtype_size(b->dtype);
    if (ea && eb && ea != eb) return ea > eb;
    if (!a->has_shape || !b->has_shape) return false;
    const int64_t na = shape_numel(a->shape), nb = shape_numel(b->shape);  // -1: a dim unknown
    return na > 0 && nb > 0 && na > nb;
  }
  // Whether the region may reach `in`'s producer, so a pulled change can still cancel there; a partition input
  // or a layout-bound op's output would keep the dearer change for good (MobileNet's float image before its
  // QuantizeLinear: 4x the bytes of the quantized one).
  bool region_continues_at(const std::string& in) const {
    const size_t pi = producer_index(in);
    std::vector<size_t> data;
    return pi != kNone && (is_internal(&g_.nodes[pi], "ToNchw") || data_inputs(g_.nodes[pi], &data));
  }

  // Which inputs of a layout-free op carry data (the rest must be scalars); false for any other op.
  static bool data_inputs(const Node& n, std::vector<size_t>* data) {
    const bool internal = n.domain == kInternalDomain;
    if (internal && (n.op == "QAdd" || n.op == "QMul")) {
      *data = {kQBinaryA, kQBinaryB};
    } else if (internal && (n.op == "Silu" || n.op == "QLut")) {  // element-wise (activation_fusion, qdq_lut)
      *data = {0};
    } else if (internal && n.op == "QResize") {  // quantized_data_movement's linear Resize on bytes
      *data = {0};
    } else if (n.outputs.empty() || !is_onnx(n)) {
      return false;
    } else if (unary_ops().count(n.op) || pool_ops().count(n.op) || n.op == "Resize") {
      *data = {0};
    } else if (binary_ops().count(n.op) || n.op == "Concat") {
      for (size_t k = 0; k < n.inputs.size(); ++k) data->push_back(k);
    } else {
      return false;
    }
    if (pool_ops().count(n.op) && n.outputs.size() > 1 && !n.outputs[1].empty()) return false;  // MaxPool indices
    if ((n.op == "QuantizeLinear" || n.op == "DequantizeLinear") && n.attr_i("block_size", 0) != 0) return false;
    return true;
  }
  // Whether non-data input k of `n` may stay as it is: absent, a scalar, or read as NCHW's by the NHWC form.
  bool keeps_input(const Node& n, size_t k) const {
    if (n.domain == kInternalDomain && n.op == "QLut") return true;  // its table: 256 bytes, layout-free
    if (n.op == "Resize" || n.op == "QResize") return true;  // roi, scales, sizes: read as NCHW's by the NHWC form
    const ValueInfo* vi = info(n.inputs[k]);
    return n.inputs[k].empty() || (vi && vi->has_shape && shape_numel(vi->shape) == 1);
  }
  // Node i (its inputs already replaced by their NHWC forms) becomes its channels-last form at rank r.
  void relabel(size_t i, size_t r) {
    Node& node = g_.nodes[i];
    if (node.op == "Concat") {
      int64_t axis = node.attr_i("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(r);
      Attr& a = node.attrs["axis"];
      a.type = ORT_OP_ATTR_INT;
      a.i = axis == 0 ? 0 : axis == 1 ? static_cast<int64_t>(r) - 1 : axis - 1;
    }
    if (auto p = pool_ops().find(node.op); p != pool_ops().end()) {
      node.op = p->second;
      node.domain = kInternalDomain;
      node.since_version = 1;
    } else if (node.op == "Resize") {  // keeps its opset: it decides how scales / sizes are read
      node.op = "NhwcResize";
      node.domain = kInternalDomain;
    } else if (node.domain == kInternalDomain && node.op == "QResize") {
      node.op = "NhwcQResize";
    }
  }

  bool move(size_t i) {
    Node& n = g_.nodes[i];
    // Which inputs carry data (the rest must be scalars), and the rank of the NHWC input that led here.
    std::vector<size_t> data;
    if (is_onnx(n) && reduce_ops().count(n.op)) return move_reduce(i);
    if (!data_inputs(n, &data)) return false;
    size_t r = 0;
    for (size_t k : data)
      if (k < n.inputs.size() && !nhwc_source(n.inputs[k]).empty()) r = rank(n.inputs[k]);
    if (r < 3) return false;
    for (const auto& o : n.outputs)
      if (!o.empty() && rank(o) != r && !(info(o) && !info(o)->has_shape)) return false;
    // Every input: NHWC form, re-laid constant, or scalar. Non-data inputs must be scalars or absent.
    std::vector<std::string> replaced(n.inputs.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const bool is_data = std::find(data.begin(), data.end(), k) != data.end();
      if (!is_data) {
        if (!keeps_input(n, k)) return false;
        continue;
      }
      if (!plan_input(n.inputs[k], r, &replaced[k])) return false;
    }
    Node& node = g_.nodes[i];
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (!replaced[k].empty()) node.inputs[k] = replaced[k];
    relabel(i, r);
    std::vector<std::pair<std::string, std::string>> outs;
    for (auto& o : node.outputs) {
      if (o.empty()) continue;
      const std::string nhwc = add_nhwc_value(o);
      outs.emplace_back(nhwc, o);
      o = nhwc;
    }
    for (const auto& [nhwc, nchw] : outs) add_node(layout_node("ToNchw", nhwc, nchw));
    ++report_.moved;
    return true;
  }

  // A reduction with keepdims (same rank) and constant axes: the axes re-laid, attribute or input.
  bool move_reduce(size_t i) {
    Node& n = g_.nodes[i];
    if (n.attr_i("keepdims", 1) != 1 || n.outputs.size() != 1) return false;
    const std::string src = nhwc_source(n.inputs[0]);
    const size_t r = rank(n.inputs[0]);
    if (src.empty() || r < 3) return false;
    const int64_t rr = static_cast<int64_t>(r);
    std::vector<int64_t> axes;
    if (n.has_input(1)) {
      const Tensor* t = g_.constant(n.inputs[1]);
      if (!t || t->dtype != DType::kInt64) return false;
      axes = t->as_int64();
    } else if (n.has_attr("axes")) {
      axes = n.attr_ints("axes");
    } else {
      if (n.attr_i("noop_with_empty_axes", 0)) return false;  // no axes: all of them, any layout
    }
    for (auto& a : axes) {
      if (a < -rr || a >= rr) return false;
      a = nhwc_axis(a, rr);
    }
    std::vector<int64_t> sorted = axes, spatial;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t d = 1; d + 1 < rr; ++d) spatial.push_back(d);
    if (sorted == spatial && n.op == "ReduceMean") {
      // Over every spatial dim with keepdims: a global average pool (squeeze-excite's mean), channels inner.
      n.op = "NhwcGlobalAveragePool";
      n.domain = kInternalDomain;
      n.since_version = 1;
      n.inputs = {src};
      n.attrs.clear();
      const std::string out = n.outputs[0], nhwc = add_nhwc_value(out);
      g_.nodes[i].outputs[0] = nhwc;
      add_node(layout_node("ToNchw", nhwc, out));
      ++report_.moved;
      return true;
    }
    if (n.has_input(1)) {
      n.inputs[1] = g_.add_constant(n.inputs[1] + "/nhwc", Tensor::of_int64(axes));
    } else if (n.has_attr("axes")) {
      n.attrs["axes"].ints = axes;
    }
    n.inputs[0] = src;
    const std::string out = n.outputs[0], nhwc = add_nhwc_value(out);
    g_.nodes[i].outputs[0] = nhwc;
    add_node(layout_node("ToNchw", nhwc, out));
    ++report_.moved;
    return true;
  }

  // Nodes whose outputs nobody reads any more (and that are no partition outputs) go away: layout changes
  // left behind, and a model's own Transposes that nhwc_of() looked through.
  void drop_unread_layout_changes() {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < g_.nodes.size(); ++i) {
        const Node& n = g_.nodes[i];
        if (dead_[i]) continue;
        bool unread = true;
        for (const auto& o : n.outputs)
          if (!o.empty() && (outputs_.count(o) || !readers(o).empty())) unread = false;
        if (!unread) continue;
        dead_[i] = true;
        changed = true;
      }
    }
  }

  Graph& g_;
  RewriteContext& ctx_;
  std::set<std::string> outputs_;
  std::vector<bool> dead_;
  std::map<std::string, std::string> to_nhwc_;  // NCHW value -> the output of its ToNhwc
  int counter_ = 0;
  LayoutReport report_;
};

}  // namespace

size_t to_channels_last(Graph& g, RewriteContext& ctx) {
  if (!ctx.channels_last) return 0;
  return Rewriter(g, ctx).run().convolutions;
}

}  // namespace optim
