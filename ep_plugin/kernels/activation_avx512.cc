// AVX-512 activations with parameters (kernel_table.h, ActivationFn): activation_avx2.cc's operations on
// 16 floats (SiLU through math_avx512.h's sigmoid), tails masked. Compiled with -mavx512f (and the VNNI set).
#include <immintrin.h>

#include "kernel_table.h"
#include "math_avx512.h"

namespace optim::kernels {
namespace {

template <ActivationOp Op>
void run(const ActivationParams& p, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, activation512(Op, p, _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, activation512(Op, p, _mm512_maskz_loadu_ps(k, x + i)));
  }
}

}  // namespace

void activation_f32_avx512(ActivationOp op, const ActivationParams& p, const float* x, float* y, int64_t n) {
  switch (op) {
    case ActivationOp::kHardSigmoid: return run<ActivationOp::kHardSigmoid>(p, x, y, n);
    case ActivationOp::kHardSwish: return run<ActivationOp::kHardSwish>(p, x, y, n);
    case ActivationOp::kLeakyRelu: return run<ActivationOp::kLeakyRelu>(p, x, y, n);
    case ActivationOp::kSilu: return run<ActivationOp::kSilu>(p, x, y, n);
  }
}

}  // namespace optim::kernels
