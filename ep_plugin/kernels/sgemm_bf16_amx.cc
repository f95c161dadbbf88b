// AMX-BF16 GEMM (kernel_table.h, SgemmBf16Fn) on tiles: tdpbf16ps multiplies a 16-row x 32-value bf16 tile of A
// by 16 K pairs of a packed B panel (sgemm_bf16 pair panels are exactly B tiles: 64 bytes a pair row, padded to
// whole tiles) into 16 x 16 float32 sums. Blocks of 32 rows x 32 columns: two A tiles and two B tiles feed four C
// tiles; A's bf16 rows are padded to whole tiles in both directions (SgemmBf16Fn), so every tile is full, and
// the sums go through the AVX-512 epilogue. The tiles sum a pair's products in their own order: within rounding
// of the scalar reference, not bit for bit. Compiled with -mamx-tile -mamx-bf16 (and AVX-512); only called where
// the CPU and OS allow AMX-BF16 (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "amx_tiles.h"
#include "sgemm_store_avx512.h"

namespace optim::kernels {
namespace {

constexpr int64_t kRows = 32, kKStep = 32;  // a block's rows; K values per tile step (16 pairs)

}  // namespace

void sgemm_bf16_amx_32x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const uint16_t* a,
                          int64_t lda, const uint16_t* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  static_assert(kSgemmNR == 16, "a B tile is 16 columns of bf16 pairs");
  const int64_t kpad = sgemm_bf16_row(k), panel_elems = sgemm_bf16_panel_pairs(k) * 2 * kSgemmNR;
  alignas(64) float acc[kRows * 2 * kSgemmNR];
  load_amx_tile_config();
  // Panels outer: a pair of panels' weights, read from memory once, serve every block of rows from L1 / L2.
  for (int64_t p = p0; p < p1; p += 2) {
    const uint16_t* b0 = b_packed + p * panel_elems;
    const uint16_t* b1 = p + 1 < p1 ? b0 + panel_elems : b0;  // a lone last panel: computed twice, kept once
    for (int64_t i = m0; i < m1; i += kRows) {
      const int64_t rows = std::min(kRows, m1 - i);
      const uint16_t* a0 = a + i * lda;
      const uint16_t* a1 = a0 + 16 * lda;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t k0 = 0; k0 < kpad; k0 += kKStep) {
        const int64_t q0 = k0 / 2;  // the B tile's first pair row (panels are padded to whole tiles)
        _tile_loadd(4, a0 + k0, lda * sizeof(uint16_t));
        _tile_loadd(5, a1 + k0, lda * sizeof(uint16_t));
        _tile_loadd(6, b0 + q0 * 2 * kSgemmNR, 64);
        _tile_loadd(7, b1 + q0 * 2 * kSgemmNR, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, acc, 2 * kSgemmNR * sizeof(float));
      _tile_stored(1, acc + kSgemmNR, 2 * kSgemmNR * sizeof(float));
      _tile_stored(2, acc + 16 * 2 * kSgemmNR, 2 * kSgemmNR * sizeof(float));
      _tile_stored(3, acc + 16 * 2 * kSgemmNR + kSgemmNR, 2 * kSgemmNR * sizeof(float));
      for (int64_t h = 0; h < 2 && p + h < p1; ++h) {
        const int64_t j0 = (p + h) * kSgemmNR, cols = std::min<int64_t>(kSgemmNR, n - j0);
        for (int64_t r = 0; r < rows; ++r)
          store_row(acc + r * 2 * kSgemmNR + h * kSgemmNR, c + (i + r) * ldc + j0, i + r, j0, cols, ep);
      }
    }
  }
  _tile_release();
}

}  // namespace optim::kernels
