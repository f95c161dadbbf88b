// AVX2 transposes (kernel_table.h): 8 x 8 blocks of 32-bit values transposed in ymm registers (unpack,
// shuffle, cross-lane permute), 8 x 8 blocks of bytes in xmm registers (three rounds of unpacks); edges
// by the scalar kernels; three rows of 32-bit values into pixels of three (a stem's colour planes) by
// permutes and blends. Compiled with -mavx2.
#include <immintrin.h>

#include <type_traits>

#include "kernel_table.h"

namespace optim::kernels {
namespace {

inline void block8x8(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * ld_src)));
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // rows 4i..4i+3
    s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    const __m256 lo = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20), hi = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * ld_dst), _mm256_castps_si256(lo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (i + 4) * ld_dst), _mm256_castps_si256(hi));
  }
}

// Rows 0..7 of 8 bytes -> columns: three rounds of interleaving, each output row 8 bytes.
inline void bytes8x8(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst) {
  __m128i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i * ld_src));
  const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpacklo_epi8(r[2], r[3]);
  const __m128i t2 = _mm_unpacklo_epi8(r[4], r[5]), t3 = _mm_unpacklo_epi8(r[6], r[7]);
  const __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
  const __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
  const __m128i v[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                        _mm_unpackhi_epi32(u1, u3)};
  for (int i = 0; i < 4; ++i) {  // v[i] holds output rows 2i and 2i + 1
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 2 * i * ld_dst), v[i]);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * i + 1) * ld_dst), _mm_unpackhi_epi64(v[i], v[i]));
  }
}

// Three rows (an image row's colour planes) into their columns, dst[3c + r] = src[r * ld_src + c]: eight
// columns a step, each output vector picked from the three rows by the same permute (column index) and two
// blends (which row each lane takes).
inline void interleave3(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t cols) {
  const __m256i idx[3] = {_mm256_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2), _mm256_setr_epi32(2, 3, 3, 3, 4, 4, 4, 5),
                          _mm256_setr_epi32(5, 5, 6, 6, 6, 7, 7, 7)};
  // Lane e of output vector v holds row (8v + e) % 3: blend masks (imm8, bit e) for rows 1 and 2.
  constexpr int kRow1[3] = {0x92, 0x24, 0x49}, kRow2[3] = {0x24, 0x49, 0x92};
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256 r0 = _mm256_loadu_ps(reinterpret_cast<const float*>(src + c));
    const __m256 r1 = _mm256_loadu_ps(reinterpret_cast<const float*>(src + ld_src + c));
    const __m256 r2 = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 2 * ld_src + c));
    float* out = reinterpret_cast<float*>(dst + 3 * c);
    auto vec = [&](int v, auto row1, auto row2) {
      const __m256 a = _mm256_permutevar8x32_ps(r0, idx[v]);
      const __m256 b = _mm256_blend_ps(a, _mm256_permutevar8x32_ps(r1, idx[v]), decltype(row1)::value);
      _mm256_storeu_ps(out + 8 * v, _mm256_blend_ps(b, _mm256_permutevar8x32_ps(r2, idx[v]), decltype(row2)::value));
    };
    vec(0, std::integral_constant<int, kRow1[0]>{}, std::integral_constant<int, kRow2[0]>{});
    vec(1, std::integral_constant<int, kRow1[1]>{}, std::integral_constant<int, kRow2[1]>{});
    vec(2, std::integral_constant<int, kRow1[2]>{}, std::integral_constant<int, kRow2[2]>{});
  }
  for (; c < cols; ++c)
    for (int r = 0; r < 3; ++r) dst[3 * c + r] = src[r * ld_src + c];
}

}  // namespace

void transpose8_avx2_8x8(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) bytes8x8(src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
  if (c8 < cols) transpose8_scalar(src + c8, ld_src, dst + c8 * ld_dst, ld_dst, rows, cols - c8);
  if (r8 < rows) transpose8_scalar(src + r8 * ld_src, ld_src, dst + r8, ld_dst, rows - r8, c8);
}

void transpose32_avx2_8x8(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  if (rows == 3 && ld_dst == 3) return interleave3(src, ld_src, dst, cols);  // an RGB row to pixels (a stem)
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) block8x8(src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
  if (c8 < cols) transpose32_scalar(src + c8, ld_src, dst + c8 * ld_dst, ld_dst, rows, cols - c8);
  if (r8 < rows) transpose32_scalar(src + r8 * ld_src, ld_src, dst + r8, ld_dst, rows - r8, c8);
}

}  // namespace optim::kernels
