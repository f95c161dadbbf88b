// The float convolution epilogue (kernel_table.h, ConvF32Epilogue) one element at a time: the scalar
// kernels' whole epilogue and the vector kernels' ragged edges, in the same order everywhere.
#pragma once

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage: compiled into files of several ISAs

// Row m, columns j0..j0+cols-1 of C from the sums acc[0..cols).
inline void conv_f32_store_scalar(const float* acc, int64_t cols, int64_t m, int64_t j0, float* c, int64_t ldc,
                                  const ConvF32Epilogue& ep) {
  for (int64_t j = 0; j < cols; ++j) {
    float v = acc[j];
    if (ep.bias) v += ep.bias[j0 + j];
    if (ep.residual) v += ep.residual[m * ep.ld_residual + j0 + j];
    v = std::max(v, ep.lo);  // NaN stays NaN: std::max returns its first argument when unordered
    v = std::min(v, ep.hi);
    if (ep.has_act) activation_f32_scalar(ep.act, ep.act_params, &v, &v, 1);
    c[m * ldc + j0 + j] = v;
  }
}

}  // namespace
}  // namespace optim::kernels
