// AVX2 exact integer Winograd F(2x2, 3x3) tile transforms: winograd_f23.h on 16 int16 channels per vector (input)
// and 16 or 8 int32 ones (output, requantized by qstore_avx2.h's PanelStore or store8 operations), the last
// channels through winograd_q8.h's scalar types. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "qstore_avx2.h"
#include "winograd_q8.h"

namespace optim::kernels {
namespace {

template <bool Signed>
struct In16 {
  using In = uint8_t;
  using Out = int16_t;
  using Reg = __m256i;
  static constexpr int64_t kWidth = 16;
  __m256i zero;
  static In16 make(int32_t z) { return {_mm256_set1_epi16(static_cast<int16_t>(z))}; }
  Reg load(const uint8_t* p) const {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_sub_epi16(Signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b), zero);
  }
  static void store(int16_t* p, Reg v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_epi16(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_epi16(a, b); }
};

struct Out8 {
  using Sum = int32_t;
  using Reg = __m256i;
  static constexpr int64_t kWidth = 8;
  uint8_t* c;
  int64_t ldc;
  const QgemmEpilogue& ep;
  static Reg load(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Reg add(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_epi32(a, b); }
  // y is 4x the exact sum: the arithmetic shift is the scalar reference's exact quotient.
  void emit(Reg y, int64_t px, int64_t j) const { store8_sums(_mm256_srai_epi32(y, 2), px, j, ep, c, px * ldc + j); }
};

// Two vectors: 16 int32 channels, for the blocks PanelStore requantizes.
struct Out16 {
  using Sum = int32_t;
  struct Reg {
    __m256i lo, hi;
  };
  static Reg load(const int32_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
  }
  static Reg add(Reg a, Reg b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  static Reg sub(Reg a, Reg b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
};

}  // namespace

void winograd_input_q8_avx2(const uint8_t* const* px, int64_t tiles, int64_t channels, int64_t kt, bool x_signed,
                            int32_t x_zero, int16_t* v, int64_t ld_pos, int64_t ld_tile) {
  winograd_input_q8<In16>(px, tiles, channels, kt, x_signed, x_zero, v, ld_pos, ld_tile);
}

void winograd_output_q8_avx2(const int32_t* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                             const int64_t* pixel, uint8_t* c, int64_t ldc, int64_t j0, const QgemmEpilogue& ep) {
  int64_t j = 0;
  // Blocks of 16 channels PanelStore takes: a block's requantization constants stay in registers over all tiles.
  if (PanelStore::suits(ep)) {
    for (; j + 16 <= cols; j += 16) {
      const PanelStore panel(ep, j0 + j);
      const int32_t* mt = m + j;
      const int64_t* px = pixel;
      for (int64_t t = 0; t < tiles; ++t, mt += ld_tile, px += 4) {
        Out16::Reg y[4];
        winograd_output_values<Out16>(mt, ld_pos, y);
        for (int k = 0; k < 4; ++k)
          if (px[k] >= 0) panel.store(_mm256_srai_epi32(y[k].lo, 2), _mm256_srai_epi32(y[k].hi, 2), c, px[k] * ldc + j0 + j);
      }
    }
  }
  winograd_output_tiles(Out8{c, ldc, ep}, WinogradQ8ScalarOut{c, ldc, ep}, m + j, ld_pos, ld_tile, tiles, cols - j, pixel,
                        j0 + j);
}

}  // namespace optim::kernels
