// The u8 x s8 NHWC convolution GEMM on 256-bit vectors (kernel_table.h, ConvGemmQ8Args), shared by the AVX2
// kernel and the AVX-VNNI one, which differ only in the dot step `Dot`: four uint8 x int8 products of one
// column summed into its int32 lane (vpdpbusd; or vpmaddubsw's two int16 pair sums widened and added by
// vpmaddwd with ones, exact for weights that pass u8s8_pairs_exact). A tile is MR output pixels by one
// 16-column quad panel (qgemm_u8s8_pack_b: two vectors of 8 columns a K quad): per quad one broadcast per
// pixel and two dot steps per pixel into 2 * MR accumulators, which start at the columns' zero-point
// compensation. The epilogue runs in registers and equals qgemm_store bit for bit (qstore_avx2.h's store_panel);
// tiles at C's right edge and row-wise epilogues go through its store_row. A folded QAdd (ConvQAdd) runs on
// each row of a tile once stored, while in L1 (qbinary_q8_avx2, in place). A plain GEMM is the one-tap case
// (qgemm_u8s8_ymm). Included only by files compiled with -mavx2 -mfma (and -mavxvnni).
#pragma once

#include <immintrin.h>

#include <cstring>

#include "conv_rows.h"
#include "qstore_avx2.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {  // internal linkage: each ISA's file gets its own copy

// The folded QAdd on `rows` stored rows of 16-column panel p: C = Add(C, other), in place.
inline void qadd_rows(const ConvGemmQ8Args& g, int64_t m, int64_t rows, int64_t p) {
  const ConvQAdd& add = *g.add;
  const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
  for (int64_t i = m; i < m + rows; ++i) {
    uint8_t* c = static_cast<uint8_t*>(g.c) + i * g.ldc + j0;
    qbinary_q8_avx2(c, static_cast<const uint8_t*>(add.other) + i * add.ldo + j0, add.p, c, cols);
  }
}

template <int MR, typename Dot>
void u8s8_ymm_tile(const ConvGemmQ8Args& g, int64_t m, int64_t p) {
  const ConvRows& r = g.a;
  const uint8_t* x = static_cast<const uint8_t*>(r.x);
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const int64_t kq_tap = r.k_tap / 4;
  const int8_t* w = static_cast<const int8_t*>(g.w) + p * r.taps * kq_tap * 64;
  const QgemmEpilogue& ep = *g.ep;
  const int64_t j0 = p * 16, cols = panel_cols(g.n, p);
  // The common case keeps its epilogue in registers and starts the sums at the compensation.
  const bool in_registers = cols == 16 && PanelStore::suits(ep);
  const Dot dot;
  __m256i acc[MR][2];
  unrolled<2>([&](auto h) OPTIM_INLINED {
    const __m256i comp = in_registers ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.comp_col + j0 + 8 * h))
                                      : _mm256_setzero_si256();
    unrolled<MR>([&](auto i) OPTIM_INLINED { acc[i][h] = comp; });
  });
  for (int64_t t = 0; t < r.taps; ++t) {
    const uint8_t* a[MR];
    unrolled<MR>([&](auto i) OPTIM_INLINED { a[i] = x + base[i] + r.tap_off[t]; });
    for (int64_t k = 0; k < kq_tap; ++k, w += 64) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
      unrolled<MR>([&](auto i) OPTIM_INLINED {
        int32_t quad;
        std::memcpy(&quad, a[i] + 4 * k, sizeof(quad));
        const __m256i av = _mm256_set1_epi32(quad);
        acc[i][0] = dot(acc[i][0], av, b0);
        acc[i][1] = dot(acc[i][1], av, b1);
      });
    }
  }
  if (in_registers) {
    store_panel<MR>(g, ep, acc, m, j0);
    if (g.add) qadd_rows(g, m, MR, p);
    return;
  }
  alignas(32) int32_t sums[16];
  unrolled<MR>([&](auto i) OPTIM_INLINED {
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc[i][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 8), acc[i][1]);
    const int32_t row = ep.acc_row ? ep.acc_row[m + i] : 0;
    for (int64_t j = 0; j < cols; ++j) sums[j] += g.comp_col[j0 + j] + row;
    store_row(sums, m + i, j0, cols, ep, g.c, g.ldc);
  });
  if (g.add) qadd_rows(g, m, MR, p);
}

// Rows [m0, m1) by panels [p0, p1), MR rows a tile at most, in row blocks (conv_rows.h).
template <int MR, typename Dot, int... I>
void conv_gemm_u8s8_ymm(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g,
                        std::integer_sequence<int, I...>) {
  using TileFn = void (*)(const ConvGemmQ8Args&, int64_t, int64_t);
  static constexpr TileFn kTiles[] = {u8s8_ymm_tile<I + 1, Dot>...};
  for_each_conv_tile_in_row_blocks(m0, m1, p0, p1, MR, g.a.taps * g.a.k_tap,
                                   [&](int64_t m, int64_t rows, int64_t p) { kTiles[rows - 1](g, m, p); });
}

template <int MR, typename Dot>
void conv_gemm_u8s8_ymm(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  conv_gemm_u8s8_ymm<MR, Dot>(m0, m1, p0, p1, g, std::make_integer_sequence<int, MR>{});
}

// The QgemmU8S8Fn form: A's rows are lda bytes apart, read as a one-tap convolution.
template <int MR, typename Dot>
void qgemm_u8s8_ymm(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                    int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                    const QgemmEpilogue& ep) {
  static const int64_t kOneTap = 0;
  ConvGemmQ8Args g;
  g.a = {a, m1, m1, m1 * lda, 1, 1, m1, lda, 1, 4 * kq, &kOneTap};
  g.w = b_packed;
  g.n = n;
  g.c = c;
  g.ldc = ldc;
  g.comp_col = comp_col;
  g.ep = &ep;
  conv_gemm_u8s8_ymm<MR, Dot>(m0, m1, p0, p1, g);
}

}  // namespace
}  // namespace optim::kernels
