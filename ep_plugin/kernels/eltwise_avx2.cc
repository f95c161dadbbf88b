// AVX2 element-wise float32 kernels. Arithmetic and ReLU/Clip are vectorized; transcendental
// functions use the scalar reference so results match it exactly.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernel_table.h"

namespace optim::kernels {

float unary_one(UnaryOp op, float x);  // eltwise_scalar.cc

namespace {

inline __m256 apply(BinaryOp op, __m256 a, __m256 b) {
  switch (op) {
    case BinaryOp::kAdd: return _mm256_add_ps(a, b);
    case BinaryOp::kSub: return _mm256_sub_ps(a, b);
    case BinaryOp::kMul: return _mm256_mul_ps(a, b);
    case BinaryOp::kDiv: return _mm256_div_ps(a, b);
  }
  return a;
}

}  // namespace

void binary_vv_avx2(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  binary_vv_scalar(op, a + i, b + i, out + i, n - i);
}

void binary_vs_avx2(BinaryOp op, const float* a, float b, float* out, int64_t n) {
  const __m256 vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, _mm256_loadu_ps(a + i), vb));
  binary_vs_scalar(op, a + i, b, out + i, n - i);
}

void binary_sv_avx2(BinaryOp op, float a, const float* b, float* out, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, va, _mm256_loadu_ps(b + i)));
  binary_sv_scalar(op, a, b + i, out + i, n - i);
}

void unary_avx2(UnaryOp op, const float* x, float* y, int64_t n) {
  if (op != UnaryOp::kRelu) {
    unary_scalar(op, x, y, n);
    return;
  }
  int64_t i = 0;
  const __m256 zero = _mm256_setzero_ps();
  // max_ps returns its second operand when either is NaN: max(0, x) propagates NaN like the reference.
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(zero, _mm256_loadu_ps(x + i)));
  unary_scalar(op, x + i, y + i, n - i);
}

void clip_avx2(const float* x, float* y, int64_t n, float lo, float hi) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, vlo), vhi);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(c, v, nan));
  }
  clip_scalar(x + i, y + i, n - i, lo, hi);
}

}  // namespace optim::kernels
