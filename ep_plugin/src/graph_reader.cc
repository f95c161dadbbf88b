#include "graph_reader.h"

#include <cstring>

namespace optim {
namespace {

ValueInfo read_value_info(const OrtValueInfo* vi) {
  ValueInfo out;
  const char* name = nullptr;
  OPTIM_CHECK(ort().GetValueInfoName(vi, &name));
  out.name = name ? name : "";
  const OrtTypeInfo* type = nullptr;
  OPTIM_CHECK(ort().GetValueInfoTypeInfo(vi, &type));
  const OrtTensorTypeAndShapeInfo* tinfo = nullptr;
  if (type) OPTIM_CHECK(ort().CastTypeInfoToTensorInfo(type, &tinfo));
  if (tinfo) {  // null for sequences/maps/optionals: the dtype stays undefined and nothing claims it
    ONNXTensorElementDataType et;
    OPTIM_CHECK(ort().GetTensorElementType(tinfo, &et));
    out.dtype = dtype_from_onnx(et);
    size_t rank = 0;
    OPTIM_CHECK(ort().GetDimensionsCount(tinfo, &rank));
    out.shape.resize(rank);
    if (rank) OPTIM_CHECK(ort().GetDimensions(tinfo, out.shape.data(), rank));
    out.has_shape = true;  // ORT reports an unknown rank as rank 0; shape inference fills real ones
  }
  bool is_const = false;
  OPTIM_CHECK(ort().ValueInfo_IsConstantInitializer(vi, &is_const));
  out.is_constant = is_const;
  return out;
}

// Tensor attributes larger than this keep only their dtype and shape (values are needed for small ones:
// ConstantOfShape's value; ORT turns Constant nodes into initializers before an EP sees the graph).
constexpr size_t kMaxTensorAttrBytes = 4096;

// A tensor attribute that cannot be read stays an empty tensor of undefined dtype (nothing claims it).
void read_tensor_attr(const OrtOpAttr* a, Tensor* out) {
  OrtValue* v = nullptr;
  OrtStatus* st = ort().OpAttr_GetTensorAttributeAsOrtValue(a, &v);
  if (st) {
    ort().ReleaseStatus(st);
    return;
  }
  if (!v) return;
  try {
    *out = copy_tensor(v, kMaxTensorAttrBytes);
  } catch (const std::exception&) {
    *out = Tensor{};
  }
  ort().ReleaseValue(v);
}

Attr read_attr(const OrtOpAttr* a) {
  Attr out;
  OPTIM_CHECK(ort().OpAttr_GetType(a, &out.type));
  size_t need = 0;
  switch (out.type) {
    case ORT_OP_ATTR_INT:
      OPTIM_CHECK(ort().ReadOpAttr(a, out.type, &out.i, sizeof(out.i), &need));
      break;
    case ORT_OP_ATTR_FLOAT:
      OPTIM_CHECK(ort().ReadOpAttr(a, out.type, &out.f, sizeof(out.f), &need));
      break;
    case ORT_OP_ATTR_INTS:
    case ORT_OP_ATTR_FLOATS:
    case ORT_OP_ATTR_STRING:
    case ORT_OP_ATTR_STRINGS: {
      // First call reports the size needed (and fails when the buffer is too small).
      OrtStatus* st = ort().ReadOpAttr(a, out.type, nullptr, 0, &need);
      if (st) ort().ReleaseStatus(st);
      st = nullptr;
      if (out.type == ORT_OP_ATTR_INTS) {
        out.ints.resize(need / sizeof(int64_t));
        if (need) OPTIM_CHECK(ort().ReadOpAttr(a, out.type, out.ints.data(), need, &need));
      } else if (out.type == ORT_OP_ATTR_FLOATS) {
        out.floats.resize(need / sizeof(float));
        if (need) OPTIM_CHECK(ort().ReadOpAttr(a, out.type, out.floats.data(), need, &need));
      } else if (out.type == ORT_OP_ATTR_STRINGS) {
        // One buffer, each string ending in '\0'. An ORT that cannot read lists leaves `strings` empty: the
        // ops that read one refuse an empty list rather than take it for the default.
        std::string all(need, '\0');
        if (need) st = ort().ReadOpAttr(a, out.type, all.data(), need, &need);
        if (st) {
          ort().ReleaseStatus(st);
          break;
        }
        for (size_t at = 0; at < all.size() && at < need;) {
          const size_t end = all.find('\0', at);
          out.strings.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
          if (end == std::string::npos) break;
          at = end + 1;
        }
      } else {
        out.s.resize(need);
        if (need) OPTIM_CHECK(ort().ReadOpAttr(a, out.type, out.s.data(), need, &need));
        out.s.resize(need);
        while (!out.s.empty() && out.s.back() == '\0') out.s.pop_back();
      }
      break;
    }
    case ORT_OP_ATTR_TENSOR:
      read_tensor_attr(a, &out.tensor);
      break;
    default:
      break;  // graphs: kept as type only; ops that need them are not claimed
  }
  return out;
}

std::vector<const OrtValueInfo*> node_values(const OrtNode* n, bool inputs) {
  size_t count = 0;
  OPTIM_CHECK(inputs ? ort().Node_GetNumInputs(n, &count) : ort().Node_GetNumOutputs(n, &count));
  std::vector<const OrtValueInfo*> v(count, nullptr);
  if (count) OPTIM_CHECK(inputs ? ort().Node_GetInputs(n, v.data(), count) : ort().Node_GetOutputs(n, v.data(), count));
  return v;
}

// The outer-scope values a node's subgraphs read; only If/Loop/Scan have any.
std::vector<const OrtValueInfo*> implicit_inputs(const OrtNode* n) {
  size_t count = 0;
  OPTIM_CHECK(ort().Node_GetNumImplicitInputs(n, &count));
  std::vector<const OrtValueInfo*> v(count, nullptr);
  if (count) OPTIM_CHECK(ort().Node_GetImplicitInputs(n, v.data(), count));
  return v;
}

std::string value_name(const OrtValueInfo* vi) {
  const char* name = nullptr;
  if (vi) OPTIM_CHECK(ort().GetValueInfoName(vi, &name));
  return name ? name : "";
}

}  // namespace

Tensor copy_tensor(const OrtValue* v, size_t max_bytes) {
  Tensor t;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  OPTIM_CHECK(ort().GetTensorTypeAndShape(v, &info));
  ONNXTensorElementDataType et;
  size_t rank = 0;
  OrtStatus* st = ort().GetTensorElementType(info, &et);
  if (!st) st = ort().GetDimensionsCount(info, &rank);
  if (!st) {
    t.shape.resize(rank);
    if (rank) st = ort().GetDimensions(info, t.shape.data(), rank);
  }
  ort().ReleaseTensorTypeAndShapeInfo(info);
  OPTIM_CHECK(st);
  t.dtype = dtype_from_onnx(et);
  size_t nbytes = static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
  if (nbytes > max_bytes) return t;  // dtype and shape only
  t.bytes.resize(nbytes);
  if (nbytes) {
    const void* data = nullptr;
    OPTIM_CHECK(ort().GetTensorData(v, &data));
    std::memcpy(t.bytes.data(), data, nbytes);
  }
  return t;
}

ReadGraph read_graph(const OrtGraph* g, size_t max_constant_bytes) {
  ReadGraph out;
  Graph& graph = out.graph;

  auto remember = [&](const OrtValueInfo* vi) -> std::string {
    if (!vi) return "";
    ValueInfo info = read_value_info(vi);
    std::string name = info.name;
    if (info.is_constant && !graph.constants.count(name)) {
      const OrtValue* value = nullptr;
      OPTIM_CHECK(ort().ValueInfo_GetInitializerValue(vi, &value));
      if (value) {
        int64_t numel = shape_numel(info.shape);
        size_t bytes = numel < 0 ? SIZE_MAX : static_cast<size_t>(numel) * dtype_size(info.dtype);
        if (bytes <= max_constant_bytes && dtype_size(info.dtype) != 0) graph.constants[name] = copy_tensor(value);
      }
    }
    graph.values.emplace(name, std::move(info));
    return name;
  };

  size_t n_in = 0, n_out = 0, n_nodes = 0;
  OPTIM_CHECK(ort().Graph_GetNumInputs(g, &n_in));
  std::vector<const OrtValueInfo*> ins(n_in);
  if (n_in) OPTIM_CHECK(ort().Graph_GetInputs(g, ins.data(), n_in));
  for (auto* vi : ins) graph.inputs.push_back(remember(vi));
  OPTIM_CHECK(ort().Graph_GetNumOutputs(g, &n_out));
  std::vector<const OrtValueInfo*> outs(n_out);
  if (n_out) OPTIM_CHECK(ort().Graph_GetOutputs(g, outs.data(), n_out));
  for (auto* vi : outs) graph.outputs.push_back(remember(vi));

  OPTIM_CHECK(ort().Graph_GetNumNodes(g, &n_nodes));
  out.ort_nodes.resize(n_nodes);
  if (n_nodes) OPTIM_CHECK(ort().Graph_GetNodes(g, out.ort_nodes.data(), n_nodes));
  for (const OrtNode* on : out.ort_nodes) {
    Node node;
    const char* s = nullptr;
    OPTIM_CHECK(ort().Node_GetName(on, &s));
    node.name = s ? s : "";
    OPTIM_CHECK(ort().Node_GetOperatorType(on, &s));
    node.op = s ? s : "";
    OPTIM_CHECK(ort().Node_GetDomain(on, &s));
    node.domain = s ? s : "";
    OPTIM_CHECK(ort().Node_GetSinceVersion(on, &node.since_version));
    for (auto* vi : node_values(on, true)) node.inputs.push_back(remember(vi));
    for (auto* vi : node_values(on, false)) node.outputs.push_back(remember(vi));
    for (auto* vi : implicit_inputs(on)) node.implicit_inputs.push_back(value_name(vi));
    size_t n_attr = 0;
    OPTIM_CHECK(ort().Node_GetNumAttributes(on, &n_attr));
    std::vector<const OrtOpAttr*> attrs(n_attr);
    if (n_attr) OPTIM_CHECK(ort().Node_GetAttributes(on, attrs.data(), n_attr));
    for (auto* a : attrs) {
      const char* an = nullptr;
      OPTIM_CHECK(ort().OpAttr_GetName(a, &an));
      node.attrs[an ? an : ""] = read_attr(a);
    }
    graph.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace optim
