// AVX2 pooling rows (kernel_table.h, PoolRowFn): 8 floats or 32 bytes per step, the rest by the scalar
// kernel. The float max keeps ONNX's NaN rule with a compare-and-blend. Compiled with -mavx2.
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

void pool_row_avx2(PoolRowOp op, const void* x, void* y, int64_t n) {
  int64_t i = 0;
  switch (op) {
    case PoolRowOp::kMaxF32: {
      const float* a = static_cast<const float*>(x);
      float* b = static_cast<float*>(y);
      for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(a + i), acc = _mm256_loadu_ps(b + i);
        const __m256 take = _mm256_or_ps(_mm256_cmp_ps(acc, v, _CMP_LT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(b + i, _mm256_blendv_ps(acc, v, take));
      }
      return pool_row_scalar(op, a + i, b + i, n - i);
    }
    case PoolRowOp::kMaxU8:
    case PoolRowOp::kMaxS8: {
      const uint8_t* a = static_cast<const uint8_t*>(x);
      uint8_t* b = static_cast<uint8_t*>(y);
      for (; i + 32 <= n; i += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
        const __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), op == PoolRowOp::kMaxU8 ? _mm256_max_epu8(acc, v) : _mm256_max_epi8(acc, v));
      }
      return pool_row_scalar(op, a + i, b + i, n - i);
    }
    case PoolRowOp::kAddF32: {
      const float* a = static_cast<const float*>(x);
      float* b = static_cast<float*>(y);
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(b + i, _mm256_add_ps(_mm256_loadu_ps(b + i), _mm256_loadu_ps(a + i)));
      return pool_row_scalar(op, a + i, b + i, n - i);
    }
  }
}

}  // namespace optim::kernels
