// The int8 GEMM epilogue (qgemm_epilogue.h) for eight columns at a time, in AVX2: the scalar
// operations in the same order, so the results equal the scalar reference bit for bit. Included only
// by files compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include "qgemm_epilogue.h"

namespace optim::kernels {
namespace {  // internal linkage, as in qgemm_epilogue.h

// Eight real values of an integer output as int32, saturated and shifted by the zero point. Clamping to
// [qmin - zero, qmax - zero] before rounding equals rounding first (the bounds are integers) and leaves
// the integer add exact; max returns its second operand for NaN, so NaN becomes qmin as in the scalar code.
inline __m256i quantize8(__m256 real, const QgemmEpilogue& ep) {
  __m256 q = _mm256_max_ps(real, _mm256_set1_ps(static_cast<float>(ep.qmin - ep.out_zero)));
  q = _mm256_min_ps(q, _mm256_set1_ps(static_cast<float>(ep.qmax - ep.out_zero)));
  q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // half to even, whatever MXCSR says
  return _mm256_add_epi32(_mm256_cvttps_epi32(q), _mm256_set1_epi32(ep.out_zero));
}

// Eight int32 values inside the output type's range, as its bytes.
inline __m128i bytes8(__m256i v, const QgemmEpilogue& ep) {
  const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return ep.out == QuantOut::kUint8 ? _mm_packus_epi16(v16, v16) : _mm_packs_epi16(v16, v16);
}

// Eight columns j0..j0+7 of row i, all inside C: the scalar epilogue's operations, vectorized.
inline void store8(const int32_t* acc, int64_t i, int64_t j0, const QgemmEpilogue& ep, void* c, int64_t index) {
  __m256 real = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)));
  const __m256 scale = ep.scale_col ? _mm256_loadu_ps(ep.scale_col + j0)
                                    : _mm256_set1_ps(ep.scale_row ? ep.scale_row[i] : ep.scale);
  real = _mm256_mul_ps(real, scale);
  if (ep.bias_col) real = _mm256_add_ps(real, _mm256_loadu_ps(ep.bias_col + j0));
  if (ep.bias_row) real = _mm256_add_ps(real, _mm256_set1_ps(ep.bias_row[i]));
  if (ep.out == QuantOut::kFloat32) {
    _mm256_storeu_ps(static_cast<float*>(c) + index, real);
    return;
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(c) + index), bytes8(quantize8(real, ep), ep));
}

inline void store_row(const int32_t* acc, int64_t i, int64_t j0, int64_t cols, const QgemmEpilogue& ep, void* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) store8(acc + j, i, j0 + j, ep, c, i * ldc + j0 + j);
  for (; j < cols; ++j) qgemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
}

}  // namespace
}  // namespace optim::kernels
