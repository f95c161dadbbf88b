// The quantized Add / Mul (kernel_table.h QBinaryParams) sixteen values at a time in AVX-512, equal to
// qbinary_q8_scalar bit for bit: the float operations of DequantizeLinear, Add / Mul and QuantizeLinear in
// their order (a true division by the output scale). Shared by the element-wise kernel (quantize_avx512.cc)
// and the int8 convolution whose epilogue runs a folded QAdd (conv_gemm_u8s8_avx512vnni.cc). Included only
// by files compiled with -mavx512f -mavx512bw.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {
namespace {  // internal linkage, as in qgemm_epilogue.h

// Sixteen stored values (uint8 or int8) minus the zero point, as float32 (exact).
inline __m512 widen16(__m128i bytes, bool u8, int32_t zero) {
  const __m512i v = u8 ? _mm512_cvtepu8_epi32(bytes) : _mm512_cvtepi8_epi32(bytes);
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(v, _mm512_set1_epi32(zero)));
}

// One operation's parameters as vectors, made once per call.
struct QBinaryVec {
  __m512 sa, sb, sy, lo, hi;
  __m512i zero16;  // the output zero point, int16 lanes
  bool floor_raised, y_u8;
  explicit QBinaryVec(const QBinaryParams& p)
      : sa(_mm512_set1_ps(p.sa)), sb(_mm512_set1_ps(p.sb)), sy(_mm512_set1_ps(p.sy)),
        lo(_mm512_set1_ps(static_cast<float>(p.qmin - p.zy))), hi(_mm512_set1_ps(static_cast<float>(p.qmax - p.zy))),
        zero16(_mm512_set1_epi16(static_cast<int16_t>(p.zy))), floor_raised(p.qmin > (p.y_u8 ? 0 : -128)), y_u8(p.y_u8) {}

  // The results of sixteen dequantized operand pairs (a - za) * sa, (b - zb) * sb, minus the output zero
  // point, as int32 for pack(): clamped above at qmax - zy (and below at qmin - zy when a Relu raised the
  // floor) before the half-to-even rounding, which gives the same integers as clamping after (the bounds
  // are integers). Everything else below the type's range, NaN included (converted to INT32_MIN), is
  // clamped by pack's saturating narrowing, as the scalar code clamps it.
  template <bool kMul>
  __m512i result16(__m512 fa, __m512 fb) const {
    __m512 v = _mm512_div_ps(kMul ? _mm512_mul_ps(fa, fb) : _mm512_add_ps(fa, fb), sy);
    if (floor_raised) v = _mm512_max_ps(v, lo);
    return _mm512_cvt_roundps_epi32(_mm512_min_ps(hi, v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }

  // Two result16 vectors as int16 lanes with the zero point added (saturating): 128-bit lane L holds
  // r0's values 4L..4L+3, then r1's.
  __m512i words(__m512i r0, __m512i r1) const { return _mm512_adds_epi16(_mm512_packs_epi32(r0, r1), zero16); }

  // Two words() vectors (results 0-15, 16-31 in w0; 32-47, 48-63 in w1) as 64 output bytes in order: after
  // the narrowing pack, 128-bit lane L holds the dwords of results 4L.., 16+4L.., 32+4L.., 48+4L...
  __m512i bytes64(__m512i w0, __m512i w1) const {
    const __m512i b = y_u8 ? _mm512_packus_epi16(w0, w1) : _mm512_packs_epi16(w0, w1);
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
  }

  // One words() vector (results 0-15, 16-31) as 32 output bytes in order.
  __m256i bytes32(__m512i w) const { return _mm512_castsi512_si256(bytes64(w, w)); }
};

// The operation on `cols` (<= 16) values, y[j] = a[j] OP b[j] (y may be a).
inline void qbinary16(const uint8_t* a, const uint8_t* b, const QBinaryParams& p, const QBinaryVec& v, uint8_t* y,
                      int64_t cols) {
  const __mmask16 k = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __m512 fa = _mm512_mul_ps(widen16(_mm_maskz_loadu_epi8(k, a), p.a_u8, p.za), v.sa);
  const __m512 fb = _mm512_mul_ps(widen16(_mm_maskz_loadu_epi8(k, b), p.b_u8, p.zb), v.sb);
  const __m512i r = p.mul ? v.result16<true>(fa, fb) : v.result16<false>(fa, fb);
  _mm_mask_storeu_epi8(y, k, _mm256_castsi256_si128(v.bytes32(v.words(r, r))));
}

}  // namespace
}  // namespace optim::kernels
