// Quantized element-wise regions as lookup tables. Between DequantizeLinear(x) and QuantizeLinear, per
// tensor, a chain of element-wise float ops whose only varying input is x (uint8/int8; other inputs scalar
// constants, e.g. SiLU as DQ -> Sigmoid -> Q -> DQ -> Mul(DQ(x), .) -> Q, HardSwish, a requantization)
// maps each of x's 256 possible bytes to one output byte. The region becomes one QLut step: the table is
// computed here by running the region's own ops (the kernels the partition runs with) on all 256 bytes,
// so the step gives exactly what the float ops between the Q/DQ pairs would.
#include "rewrite.h"

#include <algorithm>
#include <map>
#include <set>

#include "../graph_matcher.h"
#include "../ops/op.h"
#include "../ops/qgemm.h"

namespace optim {
namespace {

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Element-wise ops a region may hold (besides per-tensor Q/DQ), by how many inputs carry data.
const std::set<std::string>& unary_ops() {
  static const std::set<std::string> ops = {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Sqrt", "Gelu",
                                            "Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Identity"};
  return ops;
}
const std::set<std::string>& binary_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div"};
  return ops;
}

bool is_q8(DType t) { return t == DType::kUint8 || t == DType::kInt8; }

class Finder {
 public:
  Finder(const Graph& g, const Matcher& m) : g_(g), m_(m) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& o : g.nodes[i].outputs)
        if (!o.empty()) producer_[o] = i;
  }

  // The region ending at QuantizeLinear `q`: its nodes (indices) and the one quantized source, or false.
  bool region(size_t q, std::set<size_t>* nodes, std::string* source) {
    nodes_.clear();
    source_.clear();
    if (!per_tensor(g_.nodes[q]) || !value_in(g_.nodes[q].inputs[0])) return false;
    nodes_.insert(q);
    *nodes = nodes_;
    *source = source_;
    return !source_.empty() && nodes_.size() >= 2;
  }

 private:
  bool scalar_constant(const std::string& v) const {
    const Tensor* t = g_.constant(v);
    return t && t->numel() == 1;
  }
  bool per_tensor(const Node& n) const {
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.has_input(k) && !scalar_constant(n.inputs[k])) return false;
    return n.attr_i("block_size", 0) == 0;
  }
  // Whether value v (float or quantized) is computed inside a region from the one source.
  bool value_in(const std::string& v) {
    auto it = producer_.find(v);
    if (it == producer_.end() || m_.dead().count(it->second)) return false;
    const size_t i = it->second;
    if (nodes_.count(i)) return true;
    const Node& n = g_.nodes[i];
    if (n.domain == kInternalDomain && n.op == "Silu") return add(i, {0});
    if (!is_onnx(n) || n.outputs.size() != 1) return false;
    if (n.op == "DequantizeLinear") {
      const ValueInfo* x = g_.value(n.inputs[0]);
      if (!x || !is_q8(x->dtype) || !per_tensor(n)) return false;
      if (!source_.empty() && source_ != n.inputs[0]) {
        // Another quantized tensor: fine only when it is itself computed in the region (a Q inside).
        return add(i, {0});
      }
      if (value_in(n.inputs[0])) return add(i, {});  // a Q -> DQ pair inside the region
      source_ = n.inputs[0];
      nodes_.insert(i);
      return true;
    }
    if (n.op == "QuantizeLinear") return per_tensor(n) && add(i, {0});
    if (unary_ops().count(n.op)) {
      if (n.op == "Clip" || n.op == "Gelu" || n.op == "HardSigmoid" || n.op == "HardSwish" || n.op == "LeakyRelu")
        for (size_t k = 1; k < n.inputs.size(); ++k)
          if (n.has_input(k) && !scalar_constant(n.inputs[k])) return false;
      return add(i, {0});
    }
    if (binary_ops().count(n.op) && n.inputs.size() == 2) {
      std::vector<size_t> data;
      for (size_t k = 0; k < 2; ++k)
        if (!scalar_constant(n.inputs[k])) data.push_back(k);
      return !data.empty() && add(i, data);
    }
    return false;
  }
  // Node i is in the region when its `data` inputs are.
  bool add(size_t i, const std::vector<size_t>& data) {
    for (size_t k : data)
      if (!value_in(g_.nodes[i].inputs[k])) return false;
    nodes_.insert(i);
    return true;
  }

  const Graph& g_;
  const Matcher& m_;
  std::map<std::string, size_t> producer_;
  std::set<size_t> nodes_;
  std::string source_;
};

// Runs the region's nodes (in graph order: topological) on the 256 bytes of the source's type and
// returns the 256 output bytes.
std::vector<uint8_t> evaluate(const Graph& g, const std::set<size_t>& region, const std::string& source,
                              const std::string& output, const kernels::KernelTable& kernels) {
  const DType src_type = g.value(source)->dtype;
  std::map<std::string, std::vector<uint8_t>> values;
  std::map<std::string, DType> types;
  std::vector<uint8_t>& src = values[source];
  src.resize(256);
  for (int b = 0; b < 256; ++b) src[static_cast<size_t>(b)] = static_cast<uint8_t>(src_type == DType::kInt8 ? b - 128 : b);
  types[source] = src_type;
  const Shape data_shape{256};
  std::vector<Shape> shapes;  // stable addresses for the refs
  shapes.reserve(64);
  for (size_t i : region) {  // std::set: ascending graph order
    const Node& n = g.nodes[i];
    std::unique_ptr<Op> op = create_op(n, g);
    op->prepare(kernels);
    std::vector<TensorRef> ins;
    std::vector<const Shape*> in_shapes;
    for (const auto& name : n.inputs) {
      TensorRef r;
      if (!name.empty()) {
        if (const Tensor* t = g.constant(name); t && !values.count(name)) {
          shapes.push_back(t->shape);
          r.dtype = t->dtype;
          r.shape = &shapes.back();
          r.data = t->bytes.data();
        } else {
          r.dtype = types.at(name);
          r.shape = &data_shape;
          r.data = values.at(name).data();
        }
      }
      ins.push_back(r);
      in_shapes.push_back(r.shape);
    }
    const std::vector<Shape> outs = op->infer(in_shapes);
    if (outs.size() != 1 || outs[0] != data_shape) throw Error(n.label() + ": a lookup-table region must stay element-wise");
    const ValueInfo* vi = g.value(n.outputs[0]);
    const DType t = vi ? vi->dtype : DType::kFloat32;
    std::vector<uint8_t>& buf = values[n.outputs[0]];
    buf.resize(256 * dtype_size(t));
    types[n.outputs[0]] = t;
    TensorOut o;
    o.dtype = t;
    o.shape = &data_shape;
    o.data = buf.data();
    RunContext rc(kernels, nullptr, nullptr, 0);
    op->run(rc, ins, {o});
  }
  return values.at(output);
}

}  // namespace

size_t fold_qdq_lookup_tables(Graph& g, RewriteContext& ctx) {
  const std::vector<std::string>& outputs = ctx.outputs;
  const kernels::KernelTable& kernels = *ctx.kernels;
  Matcher m(g, outputs);
  std::vector<Node> added;
  // From the last QuantizeLinear back: the region ending at a later one takes in the Q/DQ pairs before it.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& q = g.nodes[i];
    if (m.dead().count(i) || q.op != "QuantizeLinear" || !is_onnx(q)) continue;
    const ValueInfo* y = g.value(q.outputs[0]);
    if (!y || !is_q8(y->dtype)) continue;
    Finder f(g, m);
    std::set<size_t> region;
    std::string source;
    if (!f.region(i, &region, &source)) continue;
    std::vector<uint8_t> table;
    try {
      table = evaluate(g, region, source, q.outputs[0], kernels);
    } catch (const std::exception& e) {
      ctx.refuse("qdq_lookup_tables", q, std::string("its region could not be evaluated: ") + e.what());
      continue;  // the region stays as it is: its ops run as written
    }
    Tensor t;
    t.dtype = DType::kUint8;
    t.shape = {256};
    t.bytes = std::move(table);
    const std::string table_name = g.add_constant(q.outputs[0] + "/lut", std::move(t));
    Node lut;
    lut.name = q.name;
    lut.op = "QLut";
    lut.domain = kInternalDomain;
    lut.since_version = 1;
    lut.inputs = {source, table_name};
    lut.outputs = q.outputs;
    m.kill(&q);
    added.push_back(std::move(lut));
  }
  if (added.empty()) return 0;
  const size_t folded = added.size();
  // The region's other nodes go when nothing else reads what they compute.
  std::vector<Node> none;
  commit_rewrites(g, m, added);
  for (bool changed = true; changed;) {
    changed = false;
    Matcher sweep(g, outputs);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      bool unread = !n.outputs.empty();
      for (const auto& o : n.outputs)
        if (!o.empty() && (std::find(outputs.begin(), outputs.end(), o) != outputs.end() || sweep.readers(o) > 0)) unread = false;
      if (!unread) continue;
      sweep.kill(&n);
      commit_rewrites(g, sweep, none);
      changed = true;
      break;
    }
  }
  return folded;
}

}  // namespace optim
