// AVX-512 unary float32 kernels (kernel_table.h, UnaryFn): exp, sigmoid, tanh, erf and both GELUs on 16
// floats through math_avx512.h, the rest exactly as the scalar reference; tails masked, so results do
// not depend on position. Compiled with -mavx512f (and the VNNI set).
#include <immintrin.h>

#include "math_avx512.h"
#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline __m512 unary512(UnaryOp op, __m512 x) {
  switch (op) {
    case UnaryOp::kRelu: return _mm512_max_ps(_mm512_setzero_ps(), x);  // NaN (second operand) propagates
    case UnaryOp::kSigmoid: return sigmoid512(x);
    case UnaryOp::kTanh: return tanh512(x);
    case UnaryOp::kErf: return erf512(x);
    case UnaryOp::kSqrt: return _mm512_sqrt_ps(x);
    case UnaryOp::kExp: return exp512(x);
    case UnaryOp::kNeg: return _mm512_sub_ps(_mm512_setzero_ps(), x);
    case UnaryOp::kAbs: return _mm512_abs_ps(x);
    case UnaryOp::kGelu:  // 0.5 x (1 + erf(x / sqrt 2))
      return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                           _mm512_add_ps(_mm512_set1_ps(1.f), erf512(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)))));
    case UnaryOp::kGeluTanh: {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const __m512 inner = _mm512_mul_ps(_mm512_set1_ps(0.79788456080286536f),
                                         _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), _mm512_mul_ps(x, x), x));
      return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.f), tanh512(inner)));
    }
  }
  return x;
}

template <UnaryOp Op>
void run(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, unary512(Op, _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, unary512(Op, _mm512_maskz_loadu_ps(k, x + i)));
  }
}

}  // namespace

void unary_f32_avx512(UnaryOp op, const float* x, float* y, int64_t n) {
  switch (op) {  // one loop per op: the switch stays out of the loop
    case UnaryOp::kRelu: return run<UnaryOp::kRelu>(x, y, n);
    case UnaryOp::kSigmoid: return run<UnaryOp::kSigmoid>(x, y, n);
    case UnaryOp::kTanh: return run<UnaryOp::kTanh>(x, y, n);
    case UnaryOp::kErf: return run<UnaryOp::kErf>(x, y, n);
    case UnaryOp::kSqrt: return run<UnaryOp::kSqrt>(x, y, n);
    case UnaryOp::kExp: return run<UnaryOp::kExp>(x, y, n);
    case UnaryOp::kNeg: return run<UnaryOp::kNeg>(x, y, n);
    case UnaryOp::kAbs: return run<UnaryOp::kAbs>(x, y, n);
    case UnaryOp::kGelu: return run<UnaryOp::kGelu>(x, y, n);
    case UnaryOp::kGeluTanh: return run<UnaryOp::kGeluTanh>(x, y, n);
  }
}

}  // namespace optim::kernels
