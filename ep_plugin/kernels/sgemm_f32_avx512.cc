// AVX-512 SGEMM over packed B: 8 rows by 2 panels (32 columns) in 16 zmm accumulators; per k two panel
// rows (one zmm each) and 8 broadcasts feed 16 FMAs; K in blocks (sgemm_blocks.h: a block of the pair, 32 KB,
// in L1 for every row tile). Each output element is the same chain of FMAs in k order as in the AVX2 kernel.
// Compiled with -mavx512f; only called when the CPU reports AVX-512 (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "sgemm_blocks.h"
#include "sgemm_store_avx512.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;
constexpr int64_t kChunkRows = 64;  // rows whose sums wait between blocks of K (sgemm_blocks.h)

// out: MR rows of 32 sums; with `resume`, the accumulators start from them (a block of K after the first).
template <int MR, int NP>
inline void tile(int64_t k, const float* a, int64_t lda, const float* panel, int64_t panel_floats, float* out,
                 bool resume) {
  __m512 acc[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = resume ? _mm512_loadu_ps(out + (r * 2 + p) * kSgemmNR) : _mm512_setzero_ps();
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 b[NP];
    for (int p = 0; p < NP; ++p) b[p] = _mm512_loadu_ps(panel + p * panel_floats + kk * kSgemmNR);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(av, b[p], acc[r][p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(out + (r * 2 + p) * kSgemmNR, acc[r][p]);
}

template <int NP>
using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, bool);
template <int NP>
constexpr TileFn<NP> kTiles[kRows + 1] = {nullptr, tile<1, NP>, tile<2, NP>, tile<3, NP>, tile<4, NP>,
                                          tile<5, NP>, tile<6, NP>, tile<7, NP>, tile<8, NP>};

}  // namespace

void sgemm_f32_avx512_8x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const float* a,
                              int64_t lda, const float* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  alignas(64) float partial[kChunkRows * 2 * kSgemmNR];
  const int64_t panel_floats = k * kSgemmNR;
  for (int64_t p = p0; p < p1;) {
    const int np = p + 1 < p1 ? 2 : 1;
    const float* panel = b_packed + p * panel_floats;
    sgemm_k_blocks(
        m0, m1, k, kRows, kChunkRows, partial, 2 * kSgemmNR,
        [&](int64_t i, int64_t rows, int64_t k0, int64_t kc, float* sums, bool resume) {
          (np == 2 ? kTiles<2>[rows] : kTiles<1>[rows])(kc, a + i * lda + k0, lda, panel + k0 * kSgemmNR, panel_floats,
                                                        sums, resume);
        },
        [&](int64_t i, int64_t rows, const float* sums) {
          for (int h = 0; h < np; ++h) {
            const int64_t j0 = (p + h) * kSgemmNR;
            const int64_t cols = std::min<int64_t>(kSgemmNR, n - j0);
            for (int64_t r = 0; r < rows; ++r) store_row(sums + (r * 2 + h) * kSgemmNR, c + (i + r) * ldc + j0, i + r, j0, cols, ep);
          }
        });
    p += np;
  }
}

}  // namespace optim::kernels
