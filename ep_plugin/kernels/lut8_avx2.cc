// AVX2 256-entry byte table lookup (kernel_table.h, Lut8Fn), 32 bytes a step on vpshufb, which looks 16-byte
// tables up by an index's low 4 bits and gives 0 where its top bit is set. The table is read as sixteen rows
// T_h = table[16h .. 16h + 15]. For a byte v below 128 with high nibble H, v - 16h (signed, saturating) has its
// top bit clear exactly for h <= H, so XOR-ing the lookups of the rows C_h = T_h ^ T_{h-1} (C_0 = T_0) over
// h = 0..7 telescopes to T_H[v & 15]; bytes from 128 up saturate to -128 and add nothing. The same on v ^ 0x80,
// over rows 8..15, serves the upper half. 16 shuffles, 14 saturating subtractions and 16 XORs per 32 bytes,
// against a load, a table load and a store per byte in the scalar loop. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cstring>

#include "kernel_table.h"

namespace optim::kernels {

namespace {

inline __m256i row(const uint8_t* table, int h) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * h)));
}

// The lookups of one half: rows C_0..C_7 (already XOR-ed) by v, whose bytes outside the half are negative.
inline __m256i half_lookup(const __m256i (&c)[8], __m256i v) {
  __m256i r = _mm256_shuffle_epi8(c[0], v);
  for (int h = 1; h < 8; ++h)
    r = _mm256_xor_si256(r, _mm256_shuffle_epi8(c[h], _mm256_subs_epi8(v, _mm256_set1_epi8(static_cast<char>(16 * h)))));
  return r;
}

}  // namespace

void lut8_avx2(const uint8_t* x, uint8_t flip, const uint8_t* table, uint8_t* y, int64_t n) {
  __m256i lo[8], hi[8];
  lo[0] = row(table, 0);
  hi[0] = row(table, 8);
  for (int h = 1; h < 8; ++h) {
    lo[h] = _mm256_xor_si256(row(table, h), row(table, h - 1));
    hi[h] = _mm256_xor_si256(row(table, 8 + h), row(table, 7 + h));
  }
  const __m256i f = _mm256_set1_epi8(static_cast<char>(flip)), top = _mm256_set1_epi8(static_cast<char>(0x80));
  auto lookup = [&](__m256i v) {
    v = _mm256_xor_si256(v, f);
    return _mm256_xor_si256(half_lookup(lo, v), half_lookup(hi, _mm256_xor_si256(v, top)));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        lookup(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  if (i < n) {  // the last bytes through a staging vector (x and y may be the same bytes)
    alignas(32) uint8_t buf[32] = {};
    const auto rest = static_cast<size_t>(n - i);
    std::memcpy(buf, x + i, rest);
    _mm256_store_si256(reinterpret_cast<__m256i*>(buf), lookup(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf))));
    std::memcpy(y + i, buf, rest);
  }
}

}  // namespace optim::kernels
