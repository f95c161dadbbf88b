// AVX2 col2im_row (kernel_table.h): stride 1 adds 8 at a time; stride 2 (the usual upsampling) interleaves 8
// values with zeros and adds 16 consecutive outputs, the ones between the strided positions plus 0 (unchanged
// but for -0 becoming +0). Only positions inside [0, (n - 1) * stride] are touched: the last group goes scalar.
// Larger strides call the scalar reference. Each sum is the same single addition as the reference's.
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

void col2im_row_f32_avx2(const float* x, float* y, int64_t stride, int64_t n) {
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  } else if (stride == 2) {
    const __m256 zero = _mm256_setzero_ps();
    // Group i..i+7 touches y[2i .. 2i + 15]; 2i + 15 <= 2(n - 1) needs i + 8 < n.
    for (; i + 8 < n; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      const __m256 lo = _mm256_unpacklo_ps(v, zero), hi = _mm256_unpackhi_ps(v, zero);  // per 128-bit lane
      float* out = y + 2 * i;
      _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), _mm256_permute2f128_ps(lo, hi, 0x20)));
      _mm256_storeu_ps(out + 8, _mm256_add_ps(_mm256_loadu_ps(out + 8), _mm256_permute2f128_ps(lo, hi, 0x31)));
    }
  }
  col2im_row_f32_scalar(x + i, y + i * stride, stride, n - i);
}

}  // namespace optim::kernels
