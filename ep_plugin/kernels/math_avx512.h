// AVX-512 transcendental building blocks on 16 floats, shared by the element-wise and activation kernels.
// exp scales its polynomial by 2^n with vscalefps (one instruction, exact), so it is about a third of the
// AVX2 form's instructions; results below e^-87.3 are flushed to 0, as there, so that no product is
// subnormal (a microcode assist each). The polynomials are math_poly.h's, as for AVX2. Included only by files compiled
// with -mavx512f.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernel_table.h"
#include "math_poly.h"

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// 16 floats as the kernels written once over a vector type see them (math_poly.h, softmax_row.h, winograd_f23.h): the
// operations they share; each kernel file's type adds its own.
struct F32x16 {
  using Reg = __m512;
  static constexpr int64_t kWidth = 16;
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static Reg round(Reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365447f);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  // max/min return their second operand when it is NaN: NaN flows through to the result.
  __m512 n;
  const __m512 p = exp_reduced<F32x16>(_mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(lo, x)), n);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(p, n));  // e^88.8 overflows to inf
}

// 1 / (1 + e^-x): 0 for very negative x (e^-x overflows to inf), NaN stays.
inline __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// 2 sigmoid(2x) - 1, and near 0 (where that loses relative precision) tanh_small.
inline __m512 tanh512(__m512 x) {
  const __m512 two = _mm512_set1_ps(2.f);
  const __m512 big = _mm512_fmsub_ps(two, sigmoid512(_mm512_mul_ps(two, x)), _mm512_set1_ps(1.f));
  const __mmask16 near0 = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(0.5f), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(big, near0, tanh_small<F32x16>(x));  // NaN: the comparison fails, big keeps it
}

// erf: odd; erf_small below |x| = 0.5, above 1 - erf_tail * exp(-x^2) with x's sign, saturating to 1.
inline __m512 erf512(__m512 x) {
  const __m512 a = _mm512_abs_ps(x);
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 small = erf_small<F32x16>(x, x2);
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), x2));
  // 1 - q e with x's sign: the sign bit of x copied onto it.
  const __m512 mag = _mm512_fnmadd_ps(erf_tail<F32x16>(a), e, _mm512_set1_ps(1.f));
  const __m512 large = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag),
                                                           _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
  const __mmask16 use_small = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_LT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(_mm512_mask_mov_ps(large, use_small, small), nan, x);
}

// One activation (kernel_table.h, ActivationFn's operations) on 16 floats: activation_avx512.cc's loop body
// and the convolution epilogues'.
inline __m512 activation512(ActivationOp op, const ActivationParams& p, __m512 v) {
  switch (op) {
    case ActivationOp::kSilu: return _mm512_mul_ps(v, sigmoid512(v));
    case ActivationOp::kLeakyRelu: {
      const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NGE_UQ);  // not v >= 0: NaN too
      return _mm512_mask_mul_ps(v, neg, _mm512_set1_ps(p.alpha), v);
    }
    default: {
      const __m512 h = _mm512_min_ps(_mm512_set1_ps(1.f), _mm512_max_ps(_mm512_setzero_ps(),
                                     _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(p.alpha), v), _mm512_set1_ps(p.beta))));
      return op == ActivationOp::kHardSwish ? _mm512_mul_ps(v, h) : h;
    }
  }
}

// The float convolution epilogue (kernel_table.h, ConvF32Epilogue) on the channels of mask k (of 16): bias and
// residual (each when not null, pointing at those channels), the clamp, the activation. The AVX-512 conv
// GEMM's and Winograd's.
inline __m512 conv_epilogue512(__m512 v, __mmask16 k, const float* bias, const float* residual, const ConvF32Epilogue& ep) {
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias));
  if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, residual));
  v = _mm512_max_ps(_mm512_set1_ps(ep.lo), v);  // max/min return the second operand on NaN: NaN stays
  v = _mm512_min_ps(_mm512_set1_ps(ep.hi), v);
  return ep.has_act ? activation512(ep.act, ep.act_params, v) : v;
}

}  // namespace
}  // namespace optim::kernels
