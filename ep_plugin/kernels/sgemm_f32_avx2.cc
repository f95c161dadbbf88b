// AVX2+FMA SGEMM over packed B with a 6x16 register tile (12 accumulators, 2 B vectors, 1 broadcast), K in
// blocks (sgemm_blocks.h: a block of the panel, 16 KB, in L1 for every row tile; 32 KB L1 on AMD Zen 2/3).
// Compiled with -mavx2 -mfma; only called when the CPU reports both (see kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "sgemm_blocks.h"
#include "sgemm_epilogue.h"

namespace optim::kernels {
namespace {

constexpr int64_t kChunkRows = 8 * kSgemmMR;  // rows whose sums wait between blocks of K (sgemm_blocks.h)

// The row loops must be fully unrolled so the 2*MR accumulators live in registers; without the
// pragmas GCC keeps them on the stack and the kernel runs at a quarter of its speed.
// out: MR rows of 16 sums; with `resume`, the accumulators start from them (a block of K after the first).
template <int MR>
inline void tile(int64_t k, const float* a, int64_t lda, const float* panel, float* out, bool resume) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    c0[r] = resume ? _mm256_loadu_ps(out + r * kSgemmNR) : _mm256_setzero_ps();
    c1[r] = resume ? _mm256_loadu_ps(out + r * kSgemmNR + 8) : _mm256_setzero_ps();
  }
  const float* arow[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(panel + kk * kSgemmNR);
    const __m256 b1 = _mm256_loadu_ps(panel + kk * kSgemmNR + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(arow[r] + kk);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(out + r * kSgemmNR, c0[r]);
    _mm256_storeu_ps(out + r * kSgemmNR + 8, c1[r]);
  }
}

// Applies the epilogue to one row of the tile and writes `cols` valid columns.
inline void store_row(const float* acc, float* crow, int64_t i, int64_t j0, int64_t cols, const SgemmEpilogue& ep) {
  if (cols == kSgemmNR) {
    const __m256 alpha = _mm256_set1_ps(ep.alpha);
    __m256 v0 = _mm256_mul_ps(alpha, _mm256_loadu_ps(acc));
    __m256 v1 = _mm256_mul_ps(alpha, _mm256_loadu_ps(acc + 8));
    if (ep.accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(crow));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(crow + 8));
    }
    if (ep.bias_col) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ep.bias_col + j0));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ep.bias_col + j0 + 8));
    }
    if (ep.bias_row) {
      const __m256 br = _mm256_set1_ps(ep.bias_row[i]);
      v0 = _mm256_add_ps(v0, br);
      v1 = _mm256_add_ps(v1, br);
    }
    if (ep.relu) {
      v0 = _mm256_max_ps(_mm256_setzero_ps(), v0);  // NaN propagates (second operand wins)
      v1 = _mm256_max_ps(_mm256_setzero_ps(), v1);
    }
    _mm256_storeu_ps(crow, v0);
    _mm256_storeu_ps(crow + 8, v1);
    return;
  }
  sgemm_store_scalar(acc, cols, i, j0, crow, ep);
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, bool);
constexpr TileFn kTiles[kSgemmMR + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

void sgemm_f32_avx2_6x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const float* a,
                            int64_t lda, const float* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  alignas(32) float partial[kChunkRows * kSgemmNR];
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = b_packed + p * k * kSgemmNR;
    const int64_t j0 = p * kSgemmNR;
    const int64_t cols = std::min<int64_t>(kSgemmNR, n - j0);
    sgemm_k_blocks(
        m0, m1, k, kSgemmMR, kChunkRows, partial, kSgemmNR,
        [&](int64_t i, int64_t rows, int64_t k0, int64_t kc, float* sums, bool resume) {
          kTiles[rows](kc, a + i * lda + k0, lda, panel + k0 * kSgemmNR, sums, resume);
        },
        [&](int64_t i, int64_t rows, const float* sums) {
          for (int64_t r = 0; r < rows; ++r) store_row(sums + r * kSgemmNR, c + (i + r) * ldc + j0, i + r, j0, cols, ep);
        });
  }
}

}  // namespace optim::kernels
