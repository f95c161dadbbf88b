// AMX int8 GEMM: uint8 activations x int8 weights on tiles (tdpbusd: 16x16 int32 sums of u8 x s8 quads,
// exact). Blocks of 32 rows x 32 columns: two A tiles (16 rows x 64 bytes of K) and two B tiles (16
// quads x 16 columns: exactly 16 quads of a packed B panel, see qgemm_u8s8_pack_b) feed four C tiles.
// K is a multiple of 16 quads and A has 31 readable zero rows after its last (its row in kernel_list.inc:
// k_multiple 64, row_pad 31), so every tile is full; rows and columns past C's edge
// are computed and dropped. The sums then go through the shared AVX-512 epilogue. Compiled with
// -mamx-tile -mamx-int8 (and AVX-512); only called when the CPU and OS allow AMX (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "amx_tiles.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

// Blocks of 32 rows by 2 panels, K in steps of 16 quads (kernel_list.inc's traits say so to callers).
constexpr int64_t kAmxRows = 32, kAmxKq = 16;

}  // namespace

void qgemm_u8s8_amx_32x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                    int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                    const QgemmEpilogue& ep) {
  static_assert(kQuadNR == 16 && kAmxRows == 32 && kAmxKq == 16, "tiles are 16 rows of 64 bytes");
  load_amx_tile_config();
  alignas(64) int32_t acc[kAmxRows * 2 * kQuadNR];
  const int64_t panel_bytes = kq * 4 * kQuadNR;
  for (int64_t p = p0; p < p1; p += 2) {
    const int8_t* b0 = b_packed + p * panel_bytes;
    const int8_t* b1 = p + 1 < p1 ? b0 + panel_bytes : b0;  // a lone last panel: computed twice, kept once
    for (int64_t i = m0; i < m1; i += kAmxRows) {
      const uint8_t* a0 = a + i * lda;
      const uint8_t* a1 = a0 + 16 * lda;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t q = 0; q < kq; q += kAmxKq) {
        _tile_loadd(4, a0 + 4 * q, lda);
        _tile_loadd(5, a1 + 4 * q, lda);
        _tile_loadd(6, b0 + q * 4 * kQuadNR, 64);
        _tile_loadd(7, b1 + q * 4 * kQuadNR, 64);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
      }
      // acc: 32 rows of 32 int32 (both panels side by side).
      _tile_stored(0, acc, 2 * kQuadNR * 4);
      _tile_stored(1, acc + kQuadNR, 2 * kQuadNR * 4);
      _tile_stored(2, acc + 16 * 2 * kQuadNR, 2 * kQuadNR * 4);
      _tile_stored(3, acc + 16 * 2 * kQuadNR + kQuadNR, 2 * kQuadNR * 4);
      const int64_t rows = std::min(kAmxRows, m1 - i);
      for (int64_t h = 0; h < 2 && p + h < p1; ++h) {
        const int64_t j0 = (p + h) * kQuadNR;
        const int64_t cols = std::min<int64_t>(kQuadNR, n - j0);
        for (int64_t r = 0; r < rows; ++r) store_row(acc + r * 2 * kQuadNR + h * kQuadNR, comp_col, i + r, j0, cols, ep, c, ldc);
      }
    }
  }
  _tile_release();
}

}  // namespace optim::kernels
