// AVX2 activations with parameters (kernel_table.h, ActivationFn): the scalar kernel's operations eight at
// a time (max/min return their second operand on NaN, so NaN stays), the tail by the scalar kernel.
// Compiled with -mavx2 -mfma (no FMA used: mul then add, as the reference).
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

void activation_f32_avx2(ActivationOp op, const ActivationParams& p, const float* x, float* y, int64_t n) {
  const __m256 alpha = _mm256_set1_ps(p.alpha), beta = _mm256_set1_ps(p.beta);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 r;
    if (op == ActivationOp::kLeakyRelu) {
      r = _mm256_blendv_ps(_mm256_mul_ps(alpha, v), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
    } else {
      const __m256 h = _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
      r = op == ActivationOp::kHardSwish ? _mm256_mul_ps(v, h) : h;
    }
    _mm256_storeu_ps(y + i, r);
  }
  activation_f32_scalar(op, p, x + i, y + i, n - i);
}

}  // namespace optim::kernels
