// AVX2 transpose of 32-bit values (kernel_table.h, Transpose32Fn): 8 x 8 blocks transposed in registers
// (unpack, shuffle, cross-lane permute), edges by the scalar kernel. Compiled with -mavx2.
#include <immintrin.h>

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

}  // namespace

void transpose32_avx2_8x8(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) block8x8(src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
  if (c8 < cols) transpose32_scalar(src + c8, ld_src, dst + c8 * ld_dst, ld_dst, rows, cols - c8);
  if (r8 < rows) transpose32_scalar(src + r8 * ld_src, ld_src, dst + r8, ld_dst, rows - r8, c8);
}

}  // namespace optim::kernels
