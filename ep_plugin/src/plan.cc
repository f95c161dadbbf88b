// Building a Plan: slots for every value, one step per node (its op created and prepared once), the slots
// whose values decide shapes, and each slot's last reader.
#include "plan.h"

#include <algorithm>
#include <cstring>

namespace optim {
namespace {

// The values of a constant that decides shapes (ShapeValues): int64, or float32 as bit patterns.
std::vector<int64_t> shape_values_of(const Tensor& t) {
  if (t.dtype != DType::kFloat32) return t.as_int64();
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, t.bytes.data() + i * 4, 4);
    out[i] = bits;
  }
  return out;
}

}  // namespace

Plan::Plan(std::string name, const Graph& graph, const std::vector<std::string>& input_names,
           const std::vector<std::string>& output_names, const kernels::KernelTable& kernels)
    : name_(std::move(name)), kernels_(kernels), constants_(graph.constants) {
  for (size_t i = 0; i < input_names.size(); ++i)
    input_slots_.push_back(add_slot(graph, input_names[i], SlotKind::kInput, static_cast<int>(i)));
  for (auto& [n, t] : constants_) {
    if (slot_of_.count(n)) continue;
    const int s = add_slot(graph, n, SlotKind::kConstant, -1);
    slots_[static_cast<size_t>(s)].constant = &t;
    slots_[static_cast<size_t>(s)].dtype = t.dtype;
  }
  std::map<std::string, int> output_index;
  for (size_t i = 0; i < output_names.size(); ++i) output_index[output_names[i]] = static_cast<int>(i);
  for (size_t ni : topo_order(graph)) add_step(graph, graph.nodes[ni], output_index);
  output_slots_.assign(output_names.size(), -1);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].kind == SlotKind::kOutput) output_slots_[static_cast<size_t>(slots_[i].io_index)] = static_cast<int>(i);
  for (size_t i = 0; i < output_slots_.size(); ++i)
    if (output_slots_[i] < 0) throw Error("fused output '" + output_names[i] + "' is not produced by the partition");
  find_shape_values();
  last_use_.assign(slots_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i)
    for (int in : steps_[i].in)
      if (in >= 0) last_use_[static_cast<size_t>(in)] = static_cast<int>(i);
  slot_of_.clear();
}

int Plan::add_slot(const Graph& graph, const std::string& n, SlotKind kind, int io) {
  Slot s;
  s.name = n;
  s.kind = kind;
  s.io_index = io;
  if (const ValueInfo* v = graph.value(n)) s.dtype = v->dtype;
  slots_.push_back(s);
  return slot_of_[n] = static_cast<int>(slots_.size() - 1);
}

void Plan::add_step(const Graph& graph, const Node& node, const std::map<std::string, int>& output_index) {
  Step step;
  step.label = node.label();
  if (node.has_attr("algorithm")) step.label += " (" + node.attr_s("algorithm", "") + ")";  // rewrites/winograd.cc
  if (node.has_attr("fused_before")) step.label = node.attr_s("fused_before", "") + " + " + step.label;  // nodes folded in ahead of it
  if (node.has_attr("fused")) step.label += " + " + node.attr_s("fused", "");  // nodes a rewrite folded in
  step.op_type = node.op;
  step.shape_inputs = shape_value_inputs(node);  // the partitioner's list too: one source for both
  try {
    step.op = create_op(node, graph);
    step.op->prepare(kernels_);
  } catch (const std::exception& e) {
    throw Error("compiling node " + step.label + ": " + e.what());
  }
  for (const auto& in : node.inputs) {
    if (in.empty()) { step.in.push_back(-1); continue; }
    auto it = slot_of_.find(in);
    if (it == slot_of_.end()) throw Error("node " + step.label + " reads '" + in + "', which nothing in the partition provides");
    step.in.push_back(it->second);
  }
  for (const auto& out : node.outputs) {
    if (out.empty()) { step.out.push_back(-1); continue; }
    auto oi = output_index.find(out);
    const bool leaves = oi != output_index.end();
    step.out.push_back(add_slot(graph, out, leaves ? SlotKind::kOutput : SlotKind::kTemp, leaves ? oi->second : -1));
  }
  steps_.push_back(std::move(step));
}

void Plan::find_shape_values() {
  // Slots whose values decide shapes: constants are read once here, fused inputs on every run.
  for (const Step& st : steps_) {
    for (size_t idx : st.shape_inputs) {
      if (idx >= st.in.size() || st.in[idx] < 0) continue;
      const int slot = st.in[idx];
      const Slot& sl = slots_[static_cast<size_t>(slot)];
      if (sl.kind == SlotKind::kConstant) {
        constant_values_[slot] = shape_values_of(*sl.constant);
      } else if (sl.kind == SlotKind::kInput) {
        if (sl.dtype != DType::kInt64 && sl.dtype != DType::kFloat32)
          throw Error("node " + st.label + ": shape input '" + sl.name + "' is neither int64 nor float32");
        if (std::find(value_inputs_.begin(), value_inputs_.end(), slot) == value_inputs_.end()) value_inputs_.push_back(slot);
      } else {
        throw Error("node " + st.label + ": shape input '" + sl.name + "' is computed inside the partition");
      }
    }
  }
}

std::vector<std::string> Plan::step_labels() const {
  std::vector<std::string> out;
  for (const Step& s : steps_) out.push_back(s.label);
  return out;
}

std::vector<std::string> Plan::step_kernels() const {
  std::vector<std::string> out;
  for (const Step& s : steps_) out.push_back(s.op->kernel_name());
  return out;
}

std::vector<std::string> Plan::step_ops() const {
  std::vector<std::string> out;
  for (const Step& s : steps_) out.push_back(s.op_type);
  return out;
}

std::string Plan::step_error(const Step& s, const std::vector<Shape>& shapes, const std::string& what) const {
  std::string msg = "node " + s.label + " (inputs";
  for (int in : s.in) {
    if (in < 0) { msg += " -"; continue; }
    const Slot& sl = slots_[static_cast<size_t>(in)];
    msg += " " + sl.name + ":" + dtype_name(sl.dtype) + (static_cast<size_t>(in) < shapes.size() ? shape_str(shapes[static_cast<size_t>(in)]) : "");
  }
  return msg + "): " + what;
}

}  // namespace optim
