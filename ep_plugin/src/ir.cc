#include "ir.h"

#include <cstring>

#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "ort_api.h"

namespace optim {

DType dtype_from_onnx(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return DType::kFloat32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return DType::kFloat64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return DType::kInt64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return DType::kInt32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return DType::kInt8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return DType::kUint8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return DType::kBool;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return DType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return DType::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return DType::kInt16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return DType::kUint16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return DType::kUint32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return DType::kUint64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return DType::kString;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED: return DType::kUndefined;
    default: return DType::kOther;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt8: return "int8";
    case DType::kUint8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt16: return "int16";
    case DType::kUint16: return "uint16";
    case DType::kUint32: return "uint32";
    case DType::kUint64: return "uint64";
    case DType::kString: return "string";
    case DType::kUndefined: return "undefined";
    default: return "an element type OptimEP does not know";
  }
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUint32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUint64: return 8;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUint16: return 2;
    case DType::kInt8: case DType::kUint8: case DType::kBool: return 1;
    default: return 0;
  }
}

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o << ",";
    if (s[i] < 0) o << "?"; else o << s[i];
  }
  o << "]";
  return o.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

Tensor Tensor::of_int64(const std::vector<int64_t>& values) {
  Tensor t;
  t.dtype = DType::kInt64;
  t.shape = {static_cast<int64_t>(values.size())};
  t.bytes.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::string Graph::add_constant(const std::string& base, Tensor t) {
  std::string name = base;
  for (int k = 1; values.count(name) || constants.count(name); ++k) name = base + "_" + std::to_string(k);
  values[name] = ValueInfo{name, t.dtype, true, t.shape, true};
  constants[name] = std::move(t);
  return name;
}

std::vector<int64_t> Tensor::as_int64() const {
  int64_t n = numel();
  std::vector<int64_t> out(static_cast<size_t>(n < 0 ? 0 : n));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype) {
      case DType::kInt64: out[i] = data<int64_t>()[i]; break;
      case DType::kInt32: out[i] = data<int32_t>()[i]; break;
      default: throw Error(std::string("expected an integer tensor, got ") + dtype_name(dtype));
    }
  }
  return out;
}

int64_t Node::attr_i(const std::string& n, int64_t dflt) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? dflt : it->second.i;
}

float Node::attr_f(const std::string& n, float dflt) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? dflt : it->second.f;
}

std::string Node::attr_s(const std::string& n, const std::string& dflt) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? dflt : it->second.s;
}

void Node::set_attr_f(const std::string& n, float v) {
  Attr a;
  a.type = ORT_OP_ATTR_FLOAT;
  a.f = v;
  attrs[n] = a;
}

void Node::set_attr_i(const std::string& n, int64_t v) {
  Attr a;
  a.type = ORT_OP_ATTR_INT;
  a.i = v;
  attrs[n] = a;
}

void Node::set_attr_ints(const std::string& n, const std::vector<int64_t>& v) {
  Attr a;
  a.type = ORT_OP_ATTR_INTS;
  a.ints = v;
  attrs[n] = a;
}

void Node::set_attr_s(const std::string& n, const std::string& v) {
  Attr a;
  a.type = ORT_OP_ATTR_STRING;
  a.s = v;
  attrs[n] = a;
}

std::vector<int64_t> Node::attr_ints(const std::string& n, const std::vector<int64_t>& dflt) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? dflt : it->second.ints;
}

std::vector<std::string> Node::attr_strings(const std::string& n) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? std::vector<std::string>{} : it->second.strings;
}

const Tensor* Node::attr_tensor(const std::string& n) const {
  auto it = attrs.find(n);
  return it == attrs.end() || it->second.type != ORT_OP_ATTR_TENSOR ? nullptr : &it->second.tensor;
}

std::string Node::label() const { return op + " '" + name + "'"; }

size_t Node::num_inputs() const {
  size_t n = inputs.size();
  while (n > 0 && inputs[n - 1].empty()) --n;
  return n;
}

const ValueInfo* Graph::value(const std::string& n) const {
  auto it = values.find(n);
  return it == values.end() ? nullptr : &it->second;
}

const Tensor* Graph::constant(const std::string& n) const {
  auto it = constants.find(n);
  return it == constants.end() ? nullptr : &it->second;
}

// Kahn's algorithm over the partition; ORT's order is usually topological already, this makes sure.
std::vector<size_t> topo_order(const Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<size_t> indeg(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<size_t> deps;
    for (const auto* names : {&g.nodes[i].inputs, &g.nodes[i].implicit_inputs})
      for (const auto& in : *names) {
        auto it = producer.find(in);
        if (!in.empty() && it != producer.end() && it->second != i) deps.insert(it->second);
      }
    indeg[i] = deps.size();
    for (size_t d : deps) users[d].push_back(i);
  }
  std::vector<size_t> order;
  std::queue<size_t> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (indeg[i] == 0) ready.push(i);
  while (!ready.empty()) {
    const size_t i = ready.front();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--indeg[u] == 0) ready.push(u);
  }
  if (order.size() != g.nodes.size()) throw Error("the partition has a cycle");
  return order;
}

}  // namespace optim
