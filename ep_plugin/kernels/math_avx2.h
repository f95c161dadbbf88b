// AVX2 transcendental building blocks shared by the element-wise, activation and recurrent-cell kernels:
// exp, erf, sigmoid and tanh on 8 floats (math_poly.h's polynomial approximations; relative error about 1e-7
// for exp, absolute about 1e-7 for erf). Included only by files compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include <cmath>

#include "kernel_table.h"
#include "math_poly.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// 8 floats as the kernels written once over a vector type see them (math_poly.h, softmax_row.h, winograd_f23.h): the
// operations they share; each kernel file's type adds its own.
struct F32x8 {
  using Reg = __m256;
  static constexpr int64_t kWidth = 8;
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static Reg round(Reg a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

// exp(x): e^r (exp_reduced) scaled by 2^n through the exponent bits in two halves (so n up to 128 stays
// finite). Overflows to +inf above 88.72, flushes results below e^-87 (1.65e-38, just above the smallest normal
// float) to 0, and keeps NaN. The flush point keeps every intermediate normal: a subnormal product costs a
// microcode assist, hundreds of cycles, and masked attention scores (x = -1e30 or so) would pay it for every
// element.
inline __m256 exp_ps(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228317f), lo = _mm256_set1_ps(-87.0f);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 n;
  const __m256 p = exp_reduced<F32x8>(_mm256_min_ps(_mm256_max_ps(x, lo), hi), n);
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
  return _mm256_blendv_ps(y, x, nan);
}

// erf(x): odd; erf_small below |x| = 0.5, above 1 - erf_tail * exp(-x^2) with x's sign, saturating to 1.
inline __m256 erf_ps(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.f), x);
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 small = erf_small<F32x8>(x, x2);
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x2));
  const __m256 large = _mm256_or_ps(_mm256_fnmadd_ps(erf_tail<F32x8>(a), e, _mm256_set1_ps(1.f)), sign);
  const __m256 use_small = _mm256_cmp_ps(a, _mm256_set1_ps(0.5f), _CMP_LT_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(_mm256_blendv_ps(large, small, use_small), x, nan);
}

// 1 + e^-x for the sigmoids: e^-x as exp_ps's steps on -x clamped to [-87, 88], where every intermediate is a
// normal float and one power of two scales (none of exp_ps's blends). NaN stays NaN: each clamp returns its
// second operand when one is NaN.
inline __m256 one_plus_exp_neg(__m256 x) {
  const __m256 t = _mm256_min_ps(_mm256_set1_ps(88.f), _mm256_max_ps(_mm256_set1_ps(-87.f), _mm256_sub_ps(_mm256_setzero_ps(), x)));
  __m256 n;
  const __m256 p = exp_reduced<F32x8>(t, n);
  const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  return _mm256_fmadd_ps(p, two_n, _mm256_set1_ps(1.f));
}

// q (1 / d), or 0 where d >= 2^126 (x < -87.3: the quotient would be subnormal, and libm's sigmoid is 0 or subnormal
// there; a subnormal costs its consumers a microcode assist each).
inline __m256 zero_past_2_126(__m256 d, __m256 q) {
  return _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_set1_ps(0x1p126f), _CMP_GE_OQ), q);
}

// sigmoid(x) = 1 / (1 + e^-x). The division stays: it runs beside the polynomial (a reciprocal estimate and a
// Newton step measured slower, and an ulp off near 1, where a GRU's 1 - z needs the last bit).
inline __m256 sigmoid_ps(__m256 x) {
  const __m256 d = one_plus_exp_neg(x);
  return zero_past_2_126(d, _mm256_div_ps(_mm256_set1_ps(1.f), d));
}

// tanh(x) = 2 sigmoid(2x) - 1, and near 0 (where that loses relative precision) tanh_small.
inline __m256 tanh_ps(__m256 x) {
  const __m256 two = _mm256_set1_ps(2.f);
  const __m256 big = _mm256_fmsub_ps(two, sigmoid_ps(_mm256_mul_ps(two, x)), _mm256_set1_ps(1.f));
  const __m256 near0 = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), x), _mm256_set1_ps(0.5f), _CMP_LT_OQ);
  return _mm256_blendv_ps(big, tanh_small<F32x8>(x), near0);  // NaN: the comparison fails, big keeps it
}

// One activation (kernel_table.h, ActivationFn's operations) on 8 floats: activation_avx2.cc's loop body
// and the convolution epilogues' (the hard ones mul then add, as the scalar reference).
inline __m256 activation256(ActivationOp op, const ActivationParams& p, __m256 v) {
  const __m256 zero = _mm256_setzero_ps();
  switch (op) {
    case ActivationOp::kSilu: return _mm256_mul_ps(v, sigmoid_ps(v));
    case ActivationOp::kLeakyRelu:
      return _mm256_blendv_ps(_mm256_mul_ps(_mm256_set1_ps(p.alpha), v), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
    default: {
      const __m256 h = _mm256_min_ps(_mm256_set1_ps(1.f), _mm256_max_ps(zero, _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(p.alpha), v),
                                                                                         _mm256_set1_ps(p.beta))));
      return op == ActivationOp::kHardSwish ? _mm256_mul_ps(v, h) : h;
    }
  }
}

// x * sigmoid(x) in place on a block of `rows` rows of `width` floats (a multiple of 8), `ld` apart: what the
// convolution tiles run on their stored block after its other epilogue steps. Inside the stores, with the
// tile's twelve accumulators live, each SiLU spilled and ran alone: 1x1 tile K=16 N=96 with SiLU 249 -> 202 us.
inline void silu_block(float* c, int64_t ld, int64_t rows, int64_t width) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < width; j += 8) {
      const __m256 v = _mm256_loadu_ps(c + i * ld + j);
      _mm256_storeu_ps(c + i * ld + j, _mm256_mul_ps(v, sigmoid_ps(v)));
    }
}

// The float convolution epilogue (kernel_table.h, ConvF32Epilogue) on 8 channels: bias and residual (each when not
// null, pointing at those channels), the clamp, the activation; its parameters copied into locals once, for a tile's
// many stores (read through `ep`, each would be loaded again after every store to C: a float store may alias them).
// The AVX2 conv GEMM's and Winograd's. With silu_later, a SiLU is left out, for silu_block after the stores.
struct ConvEpilogue256 {
  explicit ConvEpilogue256(const ConvF32Epilogue& ep, bool silu_later = false)
      : lo(_mm256_set1_ps(ep.lo)), hi(_mm256_set1_ps(ep.hi)),
        has_act(ep.has_act && !(silu_later && ep.act == ActivationOp::kSilu)), act(ep.act), params(ep.act_params) {}
  __m256 operator()(__m256 v, const float* bias, const float* residual) const {
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias));
    if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual));
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));  // NaN stays (second operand)
    return has_act ? activation256(act, params, v) : v;
  }
  __m256 lo, hi;
  bool has_act;
  ActivationOp act;
  ActivationParams params;
};

// The same for one store.
inline __m256 conv_epilogue256(__m256 v, const float* bias, const float* residual, const ConvF32Epilogue& ep) {
  return ConvEpilogue256(ep)(v, bias, residual);
}

}  // namespace
}  // namespace optim::kernels
