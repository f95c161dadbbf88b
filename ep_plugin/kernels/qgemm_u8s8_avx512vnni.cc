// AVX-512 VNNI int8 GEMM: uint8 activations x int8 weights, vpdpbusd (four products summed into int32,
// exact), an 8x16 tile of zmm accumulators; the epilogue runs the scalar reference's float operations
// sixteen columns at a time. Compiled with -mavx512f -mavx512bw -mavx512vnni; only called when the CPU
// reports them (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "qstore_avx512.h"

namespace optim::kernels {

namespace {

// MR rows by NP adjacent panels (16 columns each): per K quad NP panel loads and MR broadcasts feed
// MR * NP vpdpbusd, so two panels halve the broadcasts per multiply.
template <int MR, int NP>
inline void tile(int64_t kq, const uint8_t* a, int64_t lda, const int8_t* panel, int32_t* out /* MR x NP*16 */) {
  __m512i acc[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_si512();
  const int64_t panel_bytes = kq * 4 * kQuadNR;
  for (int64_t q = 0; q < kq; ++q) {
    __m512i b[NP];
    for (int p = 0; p < NP; ++p) b[p] = _mm512_loadu_si512(panel + p * panel_bytes + q * 64);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, sizeof(quad));
      const __m512i av = _mm512_set1_epi32(quad);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], av, b[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) _mm512_storeu_si512(out + (r * NP + p) * 16, acc[r][p]);
}

template <int NP>
using TileFn = void (*)(int64_t, const uint8_t*, int64_t, const int8_t*, int32_t*);
template <int NP>
constexpr TileFn<NP> kTiles[kQuadMR + 1] = {nullptr, tile<1, NP>, tile<2, NP>, tile<3, NP>, tile<4, NP>,
                                            tile<5, NP>, tile<6, NP>, tile<7, NP>, tile<8, NP>};

}  // namespace

void qgemm_u8s8_avx512vnni_8x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                           int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                           const QgemmEpilogue& ep) {
  alignas(64) int32_t acc[kQuadMR * 2 * kQuadNR];
  for (int64_t p = p0; p < p1;) {
    const int np = p + 1 < p1 ? 2 : 1;  // two panels at a time while there are two
    const int8_t* panel = b_packed + p * kq * 4 * kQuadNR;
    for (int64_t i = m0; i < m1; i += kQuadMR) {
      const int64_t rows = std::min<int64_t>(kQuadMR, m1 - i);
      (np == 2 ? kTiles<2>[rows] : kTiles<1>[rows])(kq, a + i * lda, lda, panel, acc);
      for (int h = 0; h < np; ++h) {
        const int64_t j0 = (p + h) * kQuadNR;
        const int64_t cols = std::min<int64_t>(kQuadNR, n - j0);
        for (int64_t r = 0; r < rows; ++r)
          store_row(acc + (r * np + h) * kQuadNR, comp_col, i + r, j0, cols, ep, c, ldc);
      }
    }
    p += np;
  }
}

}  // namespace optim::kernels
