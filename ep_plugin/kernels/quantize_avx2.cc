// AVX2 QuantizeLinear / DequantizeLinear, eight values at a time, with the scalar reference's exact
// operations (true division, round half to even, NaN to the minimum), so results are identical.
#include <immintrin.h>

#include <cstdint>

#include "kernel_table.h"

namespace optim::kernels {

namespace {

// QuantizeLinear's integers for eight values: the scalar reference's operations in its order.
struct Quantizer {
  __m256 scale, zero, lo, hi;
  Quantizer(float s, int32_t z, bool to_u8)
      : scale(_mm256_set1_ps(s)), zero(_mm256_set1_ps(static_cast<float>(z))), lo(_mm256_set1_ps(to_u8 ? 0.f : -128.f)),
        hi(_mm256_set1_ps(to_u8 ? 255.f : 127.f)) {}
  __m256i operator()(const float* x) const {
    __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x), scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_add_ps(v, zero);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);  // max(NaN, lo) is lo: NaN becomes the minimum
    return _mm256_cvtps_epi32(v);                  // integers already: no rounding left
  }
};

}  // namespace

void quantize_f32_avx2(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n) {
  const Quantizer quantize(scale, zero_point, to_u8);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = quantize(x + i);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    const __m128i w8 = to_u8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(q) + i), w8);
  }
  if (i < n) quantize_f32_scalar(x + i, scale, zero_point, to_u8, static_cast<uint8_t*>(q) + i, n - i);
}

// Four slots a pixel (an RGB or RGBA stem), or three (an RGB stem packed by kernel rows), eight pixels a step: the
// channels' integers interleaved in registers as four slots, then, for three, each 128-bit lane's pixels closed up
// by one byte shuffle and stored by overlapping stores (each writes past its pixels what the next one overwrites).
void quantize_pixels_f32_avx2(const float* x, int64_t plane, int64_t channels, int64_t n, const QuantizePixelsArgs& a,
                              void* out) {
  const bool three = a.kt == 3 && channels == 3;
  if (!(a.kt == 4 && channels <= 4) && !three) return quantize_pixels_f32_scalar(x, plane, channels, n, a, out);
  const Quantizer quantize(a.scale, a.zero, a.to_u8);
  // Per channel slot: the value to store (q - zero, or the byte read), and for slots past `channels` the padding.
  const __m256i shift = _mm256_set1_epi32(a.wide ? a.zero : (a.to_u8 ? 0 : -128));
  const __m256i filler = _mm256_set1_epi32(a.wide ? 0 : a.pad);
  const int64_t value_bytes = a.wide ? 2 : 1;
  // Within a lane: two pixels of four int16 (wide) or four of four bytes, their first three values kept.
  const __m256i close_up = a.wide ? _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1, 0, 1, 2, 3, 4,
                                                     5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1)
                                  : _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5,
                                                     6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  auto store16 = [](uint8_t* o, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v); };
  int64_t p = 0;
  // Three slots: the last store of a step writes 4 bytes past its pixels, inside the next two pixels' slots.
  for (; p + 8 + (three ? 2 : 0) <= n; p += 8) {
    __m256i v[4];
    for (int64_t c = 0; c < 4; ++c)
      v[c] = c < channels ? _mm256_sub_epi32(quantize(x + c * plane + p), shift) : filler;
    uint8_t* o = static_cast<uint8_t*>(out) + p * a.kt * value_bytes;
    if (a.wide) {  // int32 lanes of int16 pairs (slots 0-1, 2-3), then each pixel's two pairs side by side
      const __m256i s01 = _mm256_blend_epi16(v[0], _mm256_slli_epi32(v[1], 16), 0xAA);
      const __m256i s23 = _mm256_blend_epi16(v[2], _mm256_slli_epi32(v[3], 16), 0xAA);
      const __m256i lo = _mm256_unpacklo_epi32(s01, s23), hi = _mm256_unpackhi_epi32(s01, s23);  // pixels 0,1,4,5 / 2,3,6,7
      if (three) {
        const __m256i l3 = _mm256_shuffle_epi8(lo, close_up), h3 = _mm256_shuffle_epi8(hi, close_up);
        store16(o, _mm256_castsi256_si128(l3));
        store16(o + 12, _mm256_castsi256_si128(h3));
        store16(o + 24, _mm256_extracti128_si256(l3, 1));
        store16(o + 36, _mm256_extracti128_si256(h3, 1));
        continue;
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
    } else {  // one int32 lane a pixel: its four bytes
      const __m256i b = _mm256_or_si256(_mm256_or_si256(v[0], _mm256_slli_epi32(v[1], 8)),
                                        _mm256_or_si256(_mm256_slli_epi32(v[2], 16), _mm256_slli_epi32(v[3], 24)));
      if (three) {
        const __m256i b3 = _mm256_shuffle_epi8(b, close_up);
        store16(o, _mm256_castsi256_si128(b3));
        store16(o + 12, _mm256_extracti128_si256(b3, 1));
        continue;
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), b);
    }
  }
  if (p < n) quantize_pixels_f32_scalar(x + p, plane, channels, n - p, a, static_cast<uint8_t*>(out) + p * a.kt * value_bytes);
}

void dequantize_f32_avx2(const void* q, bool from_u8, int32_t zero_point, float scale, float* x, int64_t n) {
  const __m256i vz = _mm256_set1_epi32(zero_point);
  const __m256 vs = _mm256_set1_ps(scale);
  const uint8_t* src = static_cast<const uint8_t*>(q);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i));
    const __m256i v = from_u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, vz)), vs));
  }
  if (i < n) dequantize_f32_scalar(src + i, from_u8, zero_point, scale, x + i, n - i);
}

namespace {
inline __m256 load8_dequantized(const void* t, bool u8, int64_t i, int32_t zero, float scale) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(t) + i));
  const __m256i v = u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(zero))), _mm256_set1_ps(scale));
}
}  // namespace

namespace {

// The loop for one operation and pair of input types. Its parameters are locals: stores through a byte
// pointer may alias anything, so fields read through `p` would be reloaded (and branched on) for every
// eight values.
template <bool kMul, bool kAU8, bool kBU8, bool kYU8>
void qbinary_loop(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  const __m256 sy = _mm256_set1_ps(p.sy), zy = _mm256_set1_ps(static_cast<float>(p.zy));
  const __m256 lo = _mm256_set1_ps(static_cast<float>(p.qmin)), hi = _mm256_set1_ps(static_cast<float>(p.qmax));
  const int32_t za = p.za, zb = p.zb;
  const float sa = p.sa, sb = p.sb;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 fa = load8_dequantized(a, kAU8, i, za, sa), fb = load8_dequantized(b, kBU8, i, zb, sb);
    const __m256 r = kMul ? _mm256_mul_ps(fa, fb) : _mm256_add_ps(fa, fb);
    __m256 v = _mm256_round_ps(_mm256_div_ps(r, sy), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zy), lo), hi);
    const __m256i w = _mm256_cvtps_epi32(v);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    const __m128i w8 = kYU8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), w8);
  }
  if (i < n) qbinary_q8_scalar(static_cast<const uint8_t*>(a) + i, static_cast<const uint8_t*>(b) + i, p,
                               static_cast<uint8_t*>(y) + i, n - i);
}

template <bool kMul, bool kAU8, bool kBU8>
void qbinary_for_output(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  return p.y_u8 ? qbinary_loop<kMul, kAU8, kBU8, true>(a, b, p, y, n)
                : qbinary_loop<kMul, kAU8, kBU8, false>(a, b, p, y, n);
}

template <bool kMul>
void qbinary_for_op(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  if (p.a_u8)
    return p.b_u8 ? qbinary_for_output<kMul, true, true>(a, b, p, y, n) : qbinary_for_output<kMul, true, false>(a, b, p, y, n);
  return p.b_u8 ? qbinary_for_output<kMul, false, true>(a, b, p, y, n)
                : qbinary_for_output<kMul, false, false>(a, b, p, y, n);
}

}  // namespace

void qbinary_q8_avx2(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n) {
  return p.mul ? qbinary_for_op<true>(a, b, p, y, n) : qbinary_for_op<false>(a, b, p, y, n);
}

}  // namespace optim::kernels
