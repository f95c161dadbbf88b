// Rewrites QDQ units inside a partition into integer ops before the plan is built:
//   DequantizeLinear(x) , DequantizeLinear(W const) -> MatMul | Gemm | Conv (+ bias) [-> Relu] -> QuantizeLinear
// becomes one internal QGemm or QConv node (exact int32 accumulation, requantized in the epilogue), and
// DequantizeLinear(a) x DequantizeLinear(b) -> MatMul -> QuantizeLinear of two activations one QMatMul. A unit
// that does not match stays as it is and runs in float, which is still exactly what ONNX defines.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace optim {

// `outputs`: the partition's outputs (values that must survive the rewrite). Returns the number of
// units fused; `unfused` (optional) receives "MatMul 'name': reason" for each MatMul/Gemm left in float.
size_t fuse_qdq_units(Graph& g, const std::vector<std::string>& outputs, std::vector<std::string>* unfused = nullptr);

// Replaces each DequantizeLinear of constants (weights and biases left in float units) by its float
// result, computed once here instead of on every run. Returns the number folded.
size_t fold_constant_dequantize(Graph& g, const std::vector<std::string>& outputs);

// DequantizeLinear(a) + DequantizeLinear(b) [-> Relu] -> QuantizeLinear (residual adds) becomes one
// internal QAdd node on the quantized tensors. Returns the number fused.
size_t fuse_qdq_adds(Graph& g, const std::vector<std::string>& outputs);

// DequantizeLinear -> MaxPool / Reshape / Flatten / Squeeze / Unsqueeze / Identity -> QuantizeLinear with
// the same scale and zero point on both sides becomes the op alone on the quantized tensor: equal
// results (these ops move or pick values), without the two conversions. Returns the number rewired.
size_t keep_quantized_through_data_movement(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
