// AVX2 math_unary and math_binary kernels (kernel_table.h). Reciprocal, rounding, the Pow fast paths and
// Max/Min equal the scalar reference exactly (one IEEE operation per element); Elu uses exp_ps (relative error
// about 1e-7); Softplus, Sin, Cos and a general Pow call the scalar reference.
#include <immintrin.h>

#include <algorithm>

#include "kernel_table.h"
#include "math_avx2.h"

namespace optim::kernels {
namespace {

bool vectorized(MathOp op) {
  return op != MathOp::kSoftplus && op != MathOp::kSin && op != MathOp::kCos && op != MathOp::kPow;
}

inline __m256 math_ps(MathOp op, __m256 p, __m256 x) {
  switch (op) {
    case MathOp::kReciprocal: return _mm256_div_ps(_mm256_set1_ps(1.f), x);
    case MathOp::kFloor: return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    case MathOp::kCeil: return _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    case MathOp::kRound: return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    case MathOp::kElu: {  // NaN fails x >= 0 and stays NaN through exp
      const __m256 neg = _mm256_mul_ps(p, _mm256_sub_ps(exp_ps(x), _mm256_set1_ps(1.f)));
      return _mm256_blendv_ps(neg, x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
    }
    case MathOp::kSquare: return _mm256_mul_ps(x, x);
    case MathOp::kCube: return _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    case MathOp::kSqrt: {
      const __m256 r = _mm256_add_ps(_mm256_sqrt_ps(x), _mm256_setzero_ps());
      return _mm256_blendv_ps(r, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
    }
    default: return x;  // not reached: see vectorized()
  }
}

// Max/Min with NaN winning: max_ps returns its second operand when either is NaN, so b's NaN comes
// through and a's is put back by the blend.
inline __m256 minmax_ps(MathBinaryOp op, __m256 a, __m256 b) {
  const __m256 r = op == MathBinaryOp::kMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
  return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

inline __m256 load(const float* p, int64_t stride, int64_t i) {
  return stride ? _mm256_loadu_ps(p + i) : _mm256_set1_ps(p[0]);
}

}  // namespace

void math_unary_f32_avx2(MathOp op, float p, const float* x, float* y, int64_t n) {
  if (!vectorized(op)) {
    math_unary_f32_scalar(op, p, x, y, n);
    return;
  }
  const __m256 vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, math_ps(op, vp, _mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through the same instructions, so results do not depend on position
    alignas(32) float buf[8] = {0};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, math_ps(op, vp, _mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), y + i);
  }
}

void math_binary_f32_avx2(MathBinaryOp op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (op == MathBinaryOp::kPow) {
    math_binary_f32_scalar(op, a, sa, b, sb, y, n);
    return;
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, minmax_ps(op, load(a, sa, i), load(b, sb, i)));
  math_binary_f32_scalar(op, a + i * sa, sa, b + i * sb, sb, y + i, n - i);
}

}  // namespace optim::kernels
