// Reading and writing NumPy .npy files (format 1.0/2.0, little-endian, C order): the host's inputs and
// outputs, so that a test or a user can hand it the arrays Python made and compare what it returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace host {

struct Array {
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // the elements, C order
};

// Bytes per element of an ONNX tensor type; 0 for types the host does not handle (strings, ...).
size_t element_size(ONNXTensorElementDataType type);

// ONNX's name of the type ("float", "int64", ...), for messages.
const char* type_name(ONNXTensorElementDataType type);

// Throws std::runtime_error naming the file and what is wrong with it.
Array read_npy(const std::string& path);
void write_npy(const std::string& path, const Array& array);

}  // namespace host
