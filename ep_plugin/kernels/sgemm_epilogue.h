// The float GEMM epilogue one element at a time: the scalar kernel's whole epilogue and the vector
// kernels' ragged edges, so every ISA applies alpha, accumulate, biases and Relu in the same order.
#pragma once

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

// C row i, columns j0..j0+cols-1 (crow points at column j0), from the tile's sums acc[0..cols).
inline void sgemm_store_scalar(const float* acc, int64_t cols, int64_t i, int64_t j0, float* crow, const SgemmEpilogue& ep) {
  for (int64_t j = 0; j < cols; ++j) {
    float v = ep.alpha * acc[j];
    if (ep.accumulate) v += crow[j];
    if (ep.bias_col) v += ep.bias_col[j0 + j];
    if (ep.bias_row) v += ep.bias_row[i];
    if (ep.relu) v = std::max(v, 0.f);
    crow[j] = v;
  }
}

}  // namespace optim::kernels
