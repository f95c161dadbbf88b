// AVX2 element-wise float32 kernels. Arithmetic, ReLU and Clip equal the scalar reference exactly;
// exp, sigmoid, tanh, erf and GELU use polynomial approximations (relative error about 1e-7 for exp,
// absolute about 1e-7 for erf), tested against ONNX Runtime with the float tolerances.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernel_table.h"
#include "math_avx2.h"

namespace optim::kernels {

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

inline __m256 unary_ps(UnaryOp op, __m256 x) {
  switch (op) {
    case UnaryOp::kExp: return exp_ps(x);
    case UnaryOp::kErf: return erf_ps(x);
    case UnaryOp::kSigmoid: return sigmoid_ps(x);
    case UnaryOp::kTanh: return tanh_ps(x);
    case UnaryOp::kGelu:  // 0.5 x (1 + erf(x / sqrt 2))
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                           _mm256_add_ps(_mm256_set1_ps(1.f), erf_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)))));
    default: return x;  // not reached: see vectorized()
  }
}

bool vectorized(UnaryOp op) {
  return op == UnaryOp::kExp || op == UnaryOp::kErf || op == UnaryOp::kSigmoid || op == UnaryOp::kTanh ||
         op == UnaryOp::kGelu;
}

}  // namespace

void binary_vv_f32_avx2(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  binary_vv_f32_scalar(op, a + i, b + i, out + i, n - i);
}

void binary_vs_f32_avx2(BinaryOp op, const float* a, float b, float* out, int64_t n) {
  const __m256 vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, _mm256_loadu_ps(a + i), vb));
  binary_vs_f32_scalar(op, a + i, b, out + i, n - i);
}

void binary_sv_f32_avx2(BinaryOp op, float a, const float* b, float* out, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply(op, va, _mm256_loadu_ps(b + i)));
  binary_sv_f32_scalar(op, a, b + i, out + i, n - i);
}

void unary_f32_avx2(UnaryOp op, const float* x, float* y, int64_t n) {
  if (vectorized(op)) {
    int64_t i = 0;
    // Four independent vectors per step: each is one long dependency chain (the polynomials), so the
    // core needs several in flight to keep its pipes busy.
    for (; i + 32 <= n; i += 32) {
      const __m256 a = unary_ps(op, _mm256_loadu_ps(x + i)), b = unary_ps(op, _mm256_loadu_ps(x + i + 8));
      const __m256 c = unary_ps(op, _mm256_loadu_ps(x + i + 16)), d = unary_ps(op, _mm256_loadu_ps(x + i + 24));
      _mm256_storeu_ps(y + i, a);
      _mm256_storeu_ps(y + i + 8, b);
      _mm256_storeu_ps(y + i + 16, c);
      _mm256_storeu_ps(y + i + 24, d);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, unary_ps(op, _mm256_loadu_ps(x + i)));
    if (i < n) {  // the tail through the same approximation, so results do not depend on position
      alignas(32) float buf[8] = {0};
      std::copy(x + i, x + n, buf);
      _mm256_store_ps(buf, unary_ps(op, _mm256_load_ps(buf)));
      std::copy(buf, buf + (n - i), y + i);
    }
    return;
  }
  if (op != UnaryOp::kRelu) {
    unary_f32_scalar(op, x, y, n);
    return;
  }
  int64_t i = 0;
  const __m256 zero = _mm256_setzero_ps();
  // max_ps returns its second operand when either is NaN: max(0, x) propagates NaN like the reference.
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(zero, _mm256_loadu_ps(x + i)));
  unary_f32_scalar(op, x + i, y + i, n - i);
}

void clip_f32_avx2(const float* x, float* y, int64_t n, float lo, float hi) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, vlo), vhi);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(c, v, nan));
  }
  clip_f32_scalar(x + i, y + i, n - i, lo, hi);
}

}  // namespace optim::kernels
