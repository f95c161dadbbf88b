#include "index_inputs.h"

#include <map>
#include <set>

namespace optim {

std::string require_index_input(const Graph& g, const Node& n, size_t index, const char* what) {
  if (!n.has_input(index)) return "";
  const ValueInfo* v = g.value(n.inputs[index]);
  if (!v || v->dtype == DType::kInt64) return "";
  if (v->dtype == DType::kInt32 && v->is_constant) return "";
  return n.op + " " + what + " '" + n.inputs[index] + "' is " + dtype_name(v->dtype) +
         (v->dtype == DType::kInt32 ? " computed at run time (OptimEP reads run-time shape values as int64)" : ", not int64");
}

const std::vector<int64_t>* index_values(const std::vector<const Shape*>& in, const ShapeValues& values, size_t index,
                                         const char* what) {
  if (index >= in.size() || !in[index]) return nullptr;
  if (index >= values.size() || !values[index]) throw Error(std::string("the values of ") + what + " are not available");
  return values[index];
}

std::vector<int64_t> int_values(const TensorRef& t) {
  const int64_t n = t.numel();
  if (t.dtype == DType::kInt64) return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + n);
  if (t.dtype == DType::kInt32) return std::vector<int64_t>(t.as<int32_t>(), t.as<int32_t>() + n);
  throw Error(std::string("expected int32 or int64 values, got ") + dtype_name(t.dtype));
}

std::string values_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string feeds_a_shape(const Node& n, const Graph& g) {
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  std::set<std::string> reached(n.outputs.begin(), n.outputs.end());
  std::vector<std::string> todo(n.outputs.begin(), n.outputs.end());
  std::set<size_t> visited;
  while (!todo.empty()) {
    const std::string v = todo.back();
    todo.pop_back();
    auto it = readers.find(v);
    if (it == readers.end()) continue;
    for (size_t ri : it->second) {
      const Node& r = g.nodes[ri];
      for (size_t idx : shape_value_inputs(r))
        if (idx < r.inputs.size() && reached.count(r.inputs[idx]))
          return "its output decides the shape of " + r.label() +
                 ", so it stays with the shape computations outside OptimEP's partitions";
      if (!visited.insert(ri).second) continue;
      for (const auto& o : r.outputs)
        if (!o.empty() && reached.insert(o).second) todo.push_back(o);
    }
  }
  return "";
}

}  // namespace optim
