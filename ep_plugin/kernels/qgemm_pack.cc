// B packing for the integer GEMMs (kernel_table.h): int16 pair panels for the s16 kernels, int8 quad
// panels for the u8 x s8 ones. Plain C++ and SSE2 (every x86-64 CPU has it): every ISA reads the same layouts.
#include <emmintrin.h>

#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

size_t qgemm_s16_packed_b_elems(int64_t kp, int64_t n) {
  const int64_t panels = (n + kQgemmNR - 1) / kQgemmNR;
  return static_cast<size_t>(panels * kp * 2 * kQgemmNR);
}

void qgemm_s16_pack_b(const int16_t* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int16_t* dst) {
  const int64_t kp = (k + 1) / 2;
  const int64_t panels = (n + kQgemmNR - 1) / kQgemmNR;
  auto at = [&](int64_t kk, int64_t j) -> int16_t {
    if (kk >= k || j >= n) return 0;
    return trans_b ? b[j * ldb + kk] : b[kk * ldb + j];
  };
  for (int64_t p = 0; p < panels; ++p) {
    int16_t* out = dst + p * kp * 2 * kQgemmNR;
    for (int64_t q = 0; q < kp; ++q) {
      for (int64_t j = 0; j < kQgemmNR; ++j) {
        out[(q * kQgemmNR + j) * 2] = at(2 * q, p * kQgemmNR + j);
        out[(q * kQgemmNR + j) * 2 + 1] = at(2 * q + 1, p * kQgemmNR + j);
      }
    }
  }
}

size_t qgemm_u8s8_packed_b_bytes(int64_t kq, int64_t n) {
  return static_cast<size_t>((n + kQuadNR - 1) / kQuadNR * kq * 4 * kQuadNR);
}

namespace {

// One quad of rows (4q .. 4q+3, all inside B) of a whole panel: 16 columns of 4 bytes, each xor flip.
inline void pack_quad_panel(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3, __m128i flip,
                            uint8_t* out) {
  const __m128i s0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)), flip);
  const __m128i s1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)), flip);
  const __m128i s2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r2)), flip);
  const __m128i s3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r3)), flip);
  const __m128i lo01 = _mm_unpacklo_epi8(s0, s1), hi01 = _mm_unpackhi_epi8(s0, s1);  // (row 0, row 1) per column
  const __m128i lo23 = _mm_unpacklo_epi8(s2, s3), hi23 = _mm_unpackhi_epi8(s2, s3);
  __m128i* o = reinterpret_cast<__m128i*>(out);
  _mm_storeu_si128(o, _mm_unpacklo_epi16(lo01, lo23));  // columns 0-3, four rows each
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
}

}  // namespace

void qgemm_u8s8_pack_b_bytes(const uint8_t* b, int64_t ldb, uint8_t flip, int64_t k, int64_t n, int64_t kq, int8_t* dst) {
  static_assert(kQuadNR == 16, "a panel is one 16-byte vector per row");
  const int64_t panels = (n + kQuadNR - 1) / kQuadNR, full = n / kQuadNR;
  uint8_t* out = reinterpret_cast<uint8_t*>(dst);
  const __m128i flips = _mm_set1_epi8(static_cast<char>(flip));
  for (int64_t q = 0; q < kq; ++q) {
    const int64_t k0 = 4 * q;
    const bool whole = k0 + 3 < k;
    for (int64_t p = 0; p < panels; ++p) {
      uint8_t* o = out + (p * kq + q) * 4 * kQuadNR;
      if (k0 >= k) {  // the kernel's K padding
        std::fill(o, o + 4 * kQuadNR, uint8_t{0});
        continue;
      }
      if (whole && p < full) {
        const uint8_t* r = b + k0 * ldb + p * kQuadNR;
        pack_quad_panel(r, r + ldb, r + 2 * ldb, r + 3 * ldb, flips, o);
        continue;
      }
      for (int64_t j = 0; j < kQuadNR; ++j)  // K's last quad, the last panel: zeros past B
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t kk = k0 + t, col = p * kQuadNR + j;
          o[j * 4 + t] = kk < k && col < n ? static_cast<uint8_t>(b[kk * ldb + col] ^ flip) : 0;
        }
    }
  }
}

void qgemm_u8s8_pack_b(const int8_t* b, int64_t ldb, int64_t k, int64_t n, int64_t kq, int8_t* dst) {
  qgemm_u8s8_pack_b_bytes(reinterpret_cast<const uint8_t*>(b), ldb, 0, k, n, kq, dst);
}

bool u8s8_pairs_exact(const int8_t* b, int64_t ldb, int64_t k, int64_t n) {
  for (int64_t r = 0; r < k; r += 2)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t w0 = b[r * ldb + j], w1 = r + 1 < k ? b[(r + 1) * ldb + j] : 0;
      const int32_t pos = std::max(w0, 0) + std::max(w1, 0), neg = std::min(w0, 0) + std::min(w1, 0);
      if (pos > 128 || neg < -128) return false;
    }
  return true;
}

}  // namespace optim::kernels
