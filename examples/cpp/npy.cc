#include "npy.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace host {
namespace {

struct TypeRow {
  ONNXTensorElementDataType type;
  const char* descr;  // NumPy's dtype string
  const char* name;
  size_t size;
};

constexpr TypeRow kTypes[] = {
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, "<f4", "float", 4},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, "<f8", "double", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, "<f2", "float16", 2}, {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, "|u1", "uint8", 1},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, "|i1", "int8", 1},     {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16, "<u2", "uint16", 2},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16, "<i2", "int16", 2},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, "<u4", "uint32", 4},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, "<i4", "int32", 4},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64, "<u8", "uint64", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, "<i8", "int64", 8},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, "|b1", "bool", 1},
};

const TypeRow* find_type(ONNXTensorElementDataType type) {
  for (const TypeRow& row : kTypes)
    if (row.type == type) return &row;
  return nullptr;
}

// The value of `'key': ` in the header dict, up to the next top-level comma or closing brace.
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw std::runtime_error(path + ": .npy header has no '" + key + "'");
  at = header.find(':', at) + 1;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end = header[at] == '(' ? header.find(')', at) + 1 : header.find_first_of(",}", at);
  return header.substr(at, end - at);
}

}  // namespace

size_t element_size(ONNXTensorElementDataType type) {
  const TypeRow* row = find_type(type);
  return row ? row->size : 0;
}

const char* type_name(ONNXTensorElementDataType type) {
  const TypeRow* row = find_type(type);
  return row ? row->name : "unsupported";
}

Array read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t len[2];
    in.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (len[1] << 8);
  } else {
    uint8_t len[4];
    in.read(reinterpret_cast<char*>(len), 4);
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t(len[3]) << 24);
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw std::runtime_error(path + ": truncated .npy header");

  Array array;
  std::string descr = header_field(header, "descr", path);
  for (const TypeRow& row : kTypes)
    if (descr == std::string("'") + row.descr + "'") array.type = row.type;
  if (array.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
    throw std::runtime_error(path + ": unsupported dtype " + descr + " (little-endian numbers and bool only)");
  if (header_field(header, "fortran_order", path) != "False")
    throw std::runtime_error(path + ": Fortran-ordered array; save it with np.ascontiguousarray");
  std::string shape = header_field(header, "shape", path);
  size_t count = 1;
  for (size_t at = 1; at < shape.size();) {  // "(2, 3)" or "(5,)" or "()"
    size_t end = shape.find_first_of(",)", at);
    std::string dim = shape.substr(at, end - at);
    if (dim.find_first_not_of(' ') != std::string::npos) {
      array.shape.push_back(std::stoll(dim));
      count *= static_cast<size_t>(array.shape.back());
    }
    at = end + 1;
  }
  array.bytes.resize(count * element_size(array.type));
  if (!in.read(reinterpret_cast<char*>(array.bytes.data()), array.bytes.size()))
    throw std::runtime_error(path + ": fewer elements than its shape says");
  return array;
}

void write_npy(const std::string& path, const Array& array) {
  const TypeRow* row = find_type(array.type);
  if (!row) throw std::runtime_error(path + ": cannot save a tensor of this type");
  std::string shape = "(";
  for (int64_t d : array.shape) shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  if (array.shape.size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + row->descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');  // the data starts 64-byte aligned
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  uint16_t len = static_cast<uint16_t>(header.size());
  char prefix[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(prefix, 10);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(array.bytes.data()), array.bytes.size());
  if (!out) throw std::runtime_error(path + ": could not write");
}

}  // namespace host
