// AVX-512 depthwise NHWC convolutions (kernel_table.h) on the shared driver (dwconv_rows.h): 16 channels
// per zmm, channel tails masked. The int8 form converts x - x_zero to float (exact) and requantizes
// through qstore_avx512.h, equal to the scalar reference bit for bit. Compiled with -mavx512f -mavx512bw
// (and the VNNI set).
#include <immintrin.h>

#include "dwconv_rows.h"
#include "math_avx512.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

struct V512 {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static Mask mask_of(int64_t n) { return n >= 16 ? Mask(0xFFFF) : Mask((1u << n) - 1); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(Mask k, const float* p) { return _mm512_maskz_loadu_ps(k, p); }
  static Reg fma(Reg a, Reg b, Reg acc) { return _mm512_fmadd_ps(a, b, acc); }
};

}  // namespace

void dwconv_f32_avx512(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kDwMaxTaps) return dwconv_f32_scalar(m0, m1, a);
  const ConvF32Epilogue& ep = a.ep;
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi);
  dw_drive<V512>(
      g, {reinterpret_cast<const uint8_t*>(a.x), 4}, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) { return _mm512_maskz_loadu_ps(k, a.x + i + j); },
      [&](int64_t m, int64_t j, __mmask16 k, __m512 acc) {
        if (ep.bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.bias + j));
        if (ep.residual) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, ep.residual + m * ep.ld_residual + j));
        acc = _mm512_min_ps(hi, _mm512_max_ps(lo, acc));  // NaN stays (second operand)
        if (ep.has_act) acc = activation512(ep.act, ep.act_params, acc);
        _mm512_mask_storeu_ps(a.c + (m - a.c_row0) * a.ldc + j, k, acc);
      });
}

void dwconv_q8_avx512(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kDwMaxTaps) return dwconv_q8_scalar(m0, m1, a);
  // int16 outputs (an int16-pair projection after it: AVX-512 CPUs without VNNI) through the AVX2 kernel's, which
  // the AVX2 tables test on every host, rather than a copy of that store here that only such a CPU would run.
  if (a.centered16) return dwconv_q8_avx2(m0, m1, a);
  auto finish = [&](int64_t m, int64_t j, __mmask16 k, __m512 acc) {
    // The sums are exact integers below 2^24: converting them to int32 is exact too.
    const __m512 scale = _mm512_maskz_loadu_ps(k, a.ep->scale_col + j);
    const float* bias = a.ep->bias_col ? a.ep->bias_col + j : nullptr;
    requantize16(acc, scale, bias, k, *a.ep, a.c, m * a.ldc + j);
  };
  if (a.xq) {
    const __m512i zero = _mm512_set1_epi32(a.x_zero);
    const uint8_t* xq = a.xq;
    if (a.x_signed)
      return dw_drive<V512>(g, {xq, 1}, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) {
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, xq + i + j)), zero));
      }, finish);
    return dw_drive<V512>(g, {xq, 1}, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) {
      return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, xq + i + j)), zero));
    }, finish);
  }
  dw_drive<V512>(
      g, {reinterpret_cast<const uint8_t*>(a.x), 4}, a.w, m0, m1, [&](int64_t i, int64_t j, __mmask16 k) { return _mm512_maskz_loadu_ps(k, a.x + i + j); }, finish);
}

}  // namespace optim::kernels
