// The int8 GEMM epilogue for one output element, shared by every ISA's kernel so that they agree
// bit for bit (the AVX2 kernel vectorizes the same operations in the same order).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {
// Internal linkage on purpose: this header is compiled into scalar, AVX2 and AVX-512 files, and one
// shared (inline, COMDAT) copy could be the AVX-512 build of it, run on a CPU without AVX-512.
namespace {

inline float qgemm_real(int32_t acc, int64_t i, int64_t j, const QgemmEpilogue& ep) {
  const float scale = ep.scale_col ? ep.scale_col[j] : ep.scale_row ? ep.scale_row[i] : ep.scale;
  float real = static_cast<float>(acc) * scale;
  if (ep.bias_col) real += ep.bias_col[j];
  if (ep.bias_row) real += ep.bias_row[i];
  return real;
}

// A real value of an integer output quantized: half to even, then saturated (NaN to qmin).
inline int32_t qgemm_quantized(float real, const QgemmEpilogue& ep) {
  float q = std::nearbyint(real) + static_cast<float>(ep.out_zero);
  q = q < static_cast<float>(ep.qmin) ? static_cast<float>(ep.qmin) : q;  // NaN keeps going: caught below
  q = q > static_cast<float>(ep.qmax) ? static_cast<float>(ep.qmax) : q;
  return q == q ? static_cast<int32_t>(q) : ep.qmin;
}

// Stores one element of C: the real value, or it quantized (half to even, then saturated), or the sum itself.
inline void qgemm_store(int32_t acc, int64_t i, int64_t j, const QgemmEpilogue& ep, void* c, int64_t index) {
  if (ep.raw_sums) {
    static_cast<int32_t*>(c)[index] = acc;
    return;
  }
  const float real = qgemm_real(acc, i, j, ep);
  if (ep.out == QuantOut::kFloat32) {
    static_cast<float*>(c)[index] = real;
    return;
  }
  const int32_t v = qgemm_quantized(real, ep);
  if (ep.centered_float) static_cast<float*>(c)[index] = static_cast<float>(v - ep.out_zero);
  else if (ep.out == QuantOut::kUint8) static_cast<uint8_t*>(c)[index] = static_cast<uint8_t>(v);
  else static_cast<int8_t*>(c)[index] = static_cast<int8_t>(v);
}

}  // namespace
}  // namespace optim::kernels
