// AVX2 activations with parameters (kernel_table.h, ActivationFn): the scalar kernel's operations eight at
// a time (max/min return their second operand on NaN, so NaN stays), the tail by the scalar kernel (SiLU's
// by math_avx2.h's sigmoid, so results do not depend on position). Compiled with -mavx2 -mfma (the hard
// activations use no FMA: mul then add, as the reference).
#include <immintrin.h>

#include <algorithm>

#include "kernel_table.h"
#include "math_avx2.h"

namespace optim::kernels {

void activation_f32_avx2(ActivationOp op, const ActivationParams& p, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, activation256(op, p, _mm256_loadu_ps(x + i)));
  if (op == ActivationOp::kSilu && i < n) {
    alignas(32) float buf[8] = {0};
    std::copy(x + i, x + n, buf);
    const __m256 v = _mm256_load_ps(buf);
    _mm256_store_ps(buf, activation256(op, p, v));
    std::copy(buf, buf + (n - i), y + i);
    return;
  }
  activation_f32_scalar(op, p, x + i, y + i, n - i);
}

}  // namespace optim::kernels
