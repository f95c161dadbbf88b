// AVX-512 QuantizeLinear / DequantizeLinear (sixteen values at a time) and the quantized Add / Mul (64 at a
// time, qbinary_avx512.h), equal to the scalar reference (quantize_scalar.cc) bit for bit: the same true
// division, and the saturation done before the half-to-even rounding, which gives the same integers (the
// bounds are integers; max returns its second operand for NaN, so NaN becomes the minimum as in the scalar
// code). Compiled with -mavx512f -mavx512bw (and the VNNI set); only called when the CPU reports them.
#include <immintrin.h>

#include <cstdint>

#include "kernel_table.h"
#include "qbinary_avx512.h"

namespace optim::kernels {
namespace {

// v (real values already divided by the scale) as the saturated integers v + zero, in [lo, hi].
inline __m512i to_integers(__m512 v, int32_t zero, int32_t lo, int32_t hi) {
  v = _mm512_max_ps(v, _mm512_set1_ps(static_cast<float>(lo - zero)));
  v = _mm512_min_ps(v, _mm512_set1_ps(static_cast<float>(hi - zero)));
  return _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                          _mm512_set1_epi32(zero));
}

inline void store16(__m512i v, void* dst, int64_t i) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(dst) + i), _mm512_cvtepi32_epi8(v));
}

// Sixteen stored values (uint8 or int8) minus the zero point, as float32 (exact).
inline __m512 load16(const void* src, bool u8, int64_t i, int32_t zero) {
  return widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(src) + i)), u8, zero);
}

}  // namespace

void quantize_f32_avx512(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n) {
  const __m512 vs = _mm512_set1_ps(scale);
  const int32_t lo = to_u8 ? 0 : -128, hi = to_u8 ? 255 : 127;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(to_integers(_mm512_div_ps(_mm512_loadu_ps(x + i), vs), zero_point, lo, hi), q, i);
  if (i < n) quantize_f32_scalar(x + i, scale, zero_point, to_u8, static_cast<uint8_t*>(q) + i, n - i);
}

void dequantize_f32_avx512(const void* q, bool from_u8, int32_t zero_point, float scale, float* x, int64_t n) {
  const __m512 vs = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(load16(q, from_u8, i, zero_point), vs));
  if (i < n) dequantize_f32_scalar(static_cast<const uint8_t*>(q) + i, from_u8, zero_point, scale, x + i, n - i);
}

namespace {

// The loop for one operation and pair of input types, 64 values a step (qbinary_avx512.h). Its parameters
// are locals: stores through a byte pointer may alias anything, so fields read through `p` would be
// reloaded (and branched on) for every step.
template <bool kMul, bool kAU8, bool kBU8>
void qbinary_loop(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  const QBinaryVec v(p);
  const int32_t za = p.za, zb = p.zb;
  const uint8_t* ab = static_cast<const uint8_t*>(a);
  const uint8_t* bb = static_cast<const uint8_t*>(b);
  uint8_t* yb = static_cast<uint8_t*>(y);
  auto sixteen = [&](int64_t at) {
    const __m512 fa = _mm512_mul_ps(load16(ab, kAU8, at, za), v.sa), fb = _mm512_mul_ps(load16(bb, kBU8, at, zb), v.sb);
    return v.result16<kMul>(fa, fb);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i w0 = v.words(sixteen(i), sixteen(i + 16)), w1 = v.words(sixteen(i + 32), sixteen(i + 48));
    _mm512_storeu_si512(yb + i, v.bytes64(w0, w1));
  }
  for (; i < n; i += 16) qbinary16(ab + i, bb + i, p, v, yb + i, n - i);
}

template <bool kMul>
void qbinary_for_op(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  if (p.a_u8) return p.b_u8 ? qbinary_loop<kMul, true, true>(a, b, p, y, n) : qbinary_loop<kMul, true, false>(a, b, p, y, n);
  return p.b_u8 ? qbinary_loop<kMul, false, true>(a, b, p, y, n) : qbinary_loop<kMul, false, false>(a, b, p, y, n);
}

}  // namespace

void qbinary_q8_avx512(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  return p.mul ? qbinary_for_op<true>(a, b, p, y, n) : qbinary_for_op<false>(a, b, p, y, n);
}

}  // namespace optim::kernels
