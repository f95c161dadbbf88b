// Plain C++ copies of the graph pieces the EP works with. ORT's graph objects are valid only during
// GetCapability/Compile, so everything kept past those calls lives in these structs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace optim {

enum class DType {
  kUndefined, kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8,
  kUint64, kUint32, kUint16, kUint8, kBool, kString, kOther
};

DType dtype_from_onnx(ONNXTensorElementDataType t);
const char* dtype_name(DType t);
size_t dtype_size(DType t);  // 0 for kUndefined/kOther

using Shape = std::vector<int64_t>;  // -1 marks a dimension not known before run time

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);  // -1 when any dimension is unknown

struct ValueInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  bool has_shape = false;  // rank known
  Shape shape;
  bool is_constant = false;  // constant initializer
};

// A constant tensor owned by the EP (copied from an initializer).
struct Tensor {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return shape_numel(shape); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  // The elements as int64 whatever the integer dtype; throws for non-integer tensors.
  std::vector<int64_t> as_int64() const;
  // A 1-D int64 tensor of `values` (shapes, axes).
  static Tensor of_int64(const std::vector<int64_t>& values);
};

struct Attr {
  OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;  // ORT_OP_ATTR_STRINGS (the recurrent ops' activations)
  Tensor tensor;  // ORT_OP_ATTR_TENSOR (ConstantOfShape's value): copied when small, else dtype and shape only
};

struct Node {
  std::string name;
  std::string op;
  std::string domain;
  int since_version = 0;
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  // Values of this graph that a control-flow node's subgraphs read (If/Loop/Scan): dependencies like inputs.
  std::vector<std::string> implicit_inputs;
  std::map<std::string, Attr> attrs;

  bool has_attr(const std::string& n) const { return attrs.count(n) != 0; }
  int64_t attr_i(const std::string& n, int64_t dflt) const;
  float attr_f(const std::string& n, float dflt) const;
  std::string attr_s(const std::string& n, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& n, const std::vector<int64_t>& dflt = {}) const;
  std::vector<std::string> attr_strings(const std::string& n) const;  // empty when absent
  // Set (or replace) a float / string attribute: what rewrites record on the nodes they make.
  void set_attr_f(const std::string& n, float v);
  void set_attr_i(const std::string& n, int64_t v);
  void set_attr_s(const std::string& n, const std::string& v);
  void set_attr_ints(const std::string& n, const std::vector<int64_t>& v);
  // A tensor attribute, or nullptr when the node has none of that name.
  const Tensor* attr_tensor(const std::string& n) const;
  // "Conv 'conv1'" for error messages.
  std::string label() const;
  size_t num_inputs() const;  // present inputs, trailing omitted ones not counted
  bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
};

struct Graph {
  std::vector<Node> nodes;  // ORT's order
  std::map<std::string, ValueInfo> values;
  std::map<std::string, Tensor> constants;  // constant initializers used by the nodes
  std::vector<std::string> inputs;   // graph inputs (non-initializer)
  std::vector<std::string> outputs;  // graph outputs

  const ValueInfo* value(const std::string& n) const;
  const Tensor* constant(const std::string& n) const;
  // Adds `t` as a constant under `base`, or base_1, base_2... when that names a value already; returns the name.
  std::string add_constant(const std::string& base, Tensor t);
};

// Node indices in a topological order (producers first). Throws Error on a cycle.
std::vector<size_t> topo_order(const Graph& g);

}  // namespace optim
