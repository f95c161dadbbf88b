// AVX2 pooling windows (kernel_table.h, PoolWindowFn): 8 floats or 32 bytes per block, every tap of the
// window folded into one register, the rest by the scalar kernel. The float max keeps ONNX's NaN rule
// with a compare-and-blend. Compiled with -mavx2.
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

void pool_window_avx2(PoolOp op, const void* x, const int64_t* tap, int64_t taps, void* y, int64_t n) {
  int64_t i = 0;
  switch (op) {
    case PoolOp::kMaxF32: {
      const float* a = static_cast<const float*>(x);
      for (; i + 8 <= n; i += 8) {
        __m256 m = _mm256_loadu_ps(a + tap[0] + i);
        for (int64_t t = 1; t < taps; ++t) {
          const __m256 v = _mm256_loadu_ps(a + tap[t] + i);
          m = _mm256_blendv_ps(m, v, _mm256_or_ps(_mm256_cmp_ps(m, v, _CMP_LT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        }
        _mm256_storeu_ps(static_cast<float*>(y) + i, m);
      }
      break;
    }
    case PoolOp::kMaxU8:
    case PoolOp::kMaxS8: {
      const uint8_t* a = static_cast<const uint8_t*>(x);
      const bool u8 = op == PoolOp::kMaxU8;
      for (; i + 32 <= n; i += 32) {
        __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + tap[0] + i));
        for (int64_t t = 1; t < taps; ++t) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + tap[t] + i));
          m = u8 ? _mm256_max_epu8(m, v) : _mm256_max_epi8(m, v);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint8_t*>(y) + i), m);
      }
      break;
    }
    case PoolOp::kSumF32: {
      const float* a = static_cast<const float*>(x);
      for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int64_t t = 0; t < taps; ++t) s = _mm256_add_ps(s, _mm256_loadu_ps(a + tap[t] + i));
        _mm256_storeu_ps(static_cast<float*>(y) + i, s);
      }
      break;
    }
  }
  if (i == n) return;
  const int64_t bytes = op == PoolOp::kMaxU8 || op == PoolOp::kMaxS8 ? 1 : 4;
  pool_window_scalar(op, static_cast<const uint8_t*>(x) + i * bytes, tap, taps, static_cast<uint8_t*>(y) + i * bytes, n - i);
}

}  // namespace optim::kernels
