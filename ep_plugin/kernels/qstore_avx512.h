// The int8 GEMM epilogue (qgemm_epilogue.h) sixteen columns at a time in AVX-512, with the u8 x s8
// GEMMs' zero-point compensation added first: the scalar operations in the same order, so results equal
// the scalar reference bit for bit. Included only by files compiled with -mavx512f -mavx512bw.
#pragma once

#include <immintrin.h>

#include "qgemm_epilogue.h"

namespace optim::kernels {
namespace {  // internal linkage, as in qgemm_epilogue.h

// Sixteen real values of an integer output as int32, saturated and shifted by the zero point: clamped to
// [qmin - zero, qmax - zero] first (equal to rounding first, the bounds being integers; max returns its
// second operand for NaN, so NaN becomes qmin as in the scalar code), rounded half to even by the
// instruction itself, then the exact integer add.
inline __m512i quantize16(__m512 real, const QgemmEpilogue& ep) {
  __m512 q = _mm512_max_ps(real, _mm512_set1_ps(static_cast<float>(ep.qmin - ep.out_zero)));
  q = _mm512_min_ps(q, _mm512_set1_ps(static_cast<float>(ep.qmax - ep.out_zero)));
  return _mm512_add_epi32(_mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                          _mm512_set1_epi32(ep.out_zero));
}

// Sixteen columns j0..j0+15 of row i, all inside C.
inline void store16(const int32_t* acc, int64_t i, int64_t j0, const QgemmEpilogue& ep, void* c, int64_t index) {
  __m512 real = _mm512_cvtepi32_ps(_mm512_loadu_si512(acc));
  const __m512 scale = ep.scale_col ? _mm512_loadu_ps(ep.scale_col + j0)
                                    : _mm512_set1_ps(ep.scale_row ? ep.scale_row[i] : ep.scale);
  real = _mm512_mul_ps(real, scale);
  if (ep.bias_col) real = _mm512_add_ps(real, _mm512_loadu_ps(ep.bias_col + j0));
  if (ep.bias_row) real = _mm512_add_ps(real, _mm512_set1_ps(ep.bias_row[i]));
  if (ep.out == QuantOut::kFloat32) {
    _mm512_storeu_ps(static_cast<float*>(c) + index, real);
    return;
  }
  // In range after quantize16: plain truncation to bytes.
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(c) + index), _mm512_cvtepi32_epi8(quantize16(real, ep)));
}

// The epilogue of 16 sums of row i with per-column scales (the convolution / GEMM case), all in
// registers (always inlined: a call spills every live accumulator, the zmm registers being caller-saved): `sums` are the int32 sums (zero-point compensation included) as float32, which the
// depthwise kernels hold already; scale and bias are the columns' vectors (bias may be null), `k` masks
// C's edge. The operations of qgemm_store, in its order.
__attribute__((always_inline)) inline void requantize16(__m512 sums, __m512 scale, const float* bias, __mmask16 k, const QgemmEpilogue& ep, void* c,
                         int64_t index) {
  __m512 real = _mm512_mul_ps(sums, scale);
  if (bias) real = _mm512_add_ps(real, _mm512_maskz_loadu_ps(k, bias));
  if (ep.out == QuantOut::kFloat32) {
    _mm512_mask_storeu_ps(static_cast<float*>(c) + index, k, real);
    return;
  }
  _mm_mask_storeu_epi8(static_cast<uint8_t*>(c) + index, k, _mm512_cvtepi32_epi8(quantize16(real, ep)));
}

inline void store_row(int32_t* acc, const int32_t* comp, int64_t i, int64_t j0, int64_t cols, const QgemmEpilogue& ep,
                      void* c, int64_t ldc) {
  const int32_t row = ep.acc_row ? ep.acc_row[i] : 0;
  for (int64_t j = 0; j < cols; ++j) acc[j] += comp[j0 + j] + row;
  if (cols == kQuadNR) {
    store16(acc, i, j0, ep, c, i * ldc + j0);
    return;
  }
  for (int64_t j = 0; j < cols; ++j) qgemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
}

}  // namespace
}  // namespace optim::kernels
