// AVX-512 pooling windows (kernel_table.h, PoolWindowFn): 16 floats or 64 bytes per block, every tap of the
// window folded into one register, the block's tail masked. The float max keeps ONNX's NaN rule (a lane
// takes v when it is larger or NaN). Compiled with -mavx512f -mavx512bw (and the VNNI set).
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

void pool_window_avx512(PoolOp op, const void* x, const int64_t* tap, int64_t taps, void* y, int64_t n) {
  switch (op) {
    case PoolOp::kMaxF32: {
      const float* a = static_cast<const float*>(x);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        __m512 m = _mm512_maskz_loadu_ps(k, a + tap[0] + i);
        for (int64_t t = 1; t < taps; ++t) {
          const __m512 v = _mm512_maskz_loadu_ps(k, a + tap[t] + i);
          m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(m, v, _CMP_LT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
        }
        _mm512_mask_storeu_ps(static_cast<float*>(y) + i, k, m);
      }
      return;
    }
    case PoolOp::kMaxU8:
    case PoolOp::kMaxS8: {
      const uint8_t* a = static_cast<const uint8_t*>(x);
      const bool u8 = op == PoolOp::kMaxU8;
      for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 k = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
        __m512i m = _mm512_maskz_loadu_epi8(k, a + tap[0] + i);
        for (int64_t t = 1; t < taps; ++t) {
          const __m512i v = _mm512_maskz_loadu_epi8(k, a + tap[t] + i);
          m = u8 ? _mm512_max_epu8(m, v) : _mm512_max_epi8(m, v);
        }
        _mm512_mask_storeu_epi8(static_cast<uint8_t*>(y) + i, k, m);
      }
      return;
    }
    case PoolOp::kSumF32: {
      const float* a = static_cast<const float*>(x);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        __m512 s = _mm512_setzero_ps();
        for (int64_t t = 0; t < taps; ++t) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(k, a + tap[t] + i));
        _mm512_mask_storeu_ps(static_cast<float*>(y) + i, k, s);
      }
      return;
    }
  }
}

}  // namespace optim::kernels
