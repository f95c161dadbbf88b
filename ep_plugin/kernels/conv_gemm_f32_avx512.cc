// AVX-512 NHWC convolution GEMM on float32 (kernel_table.h, ConvGemmF32Args): 8 output pixels by 32 output
// channels (two 16-column panels), 16 zmm accumulators. Per K value, two panel loads and one broadcast
// per pixel feed 16 FMAs; the pixels' row pointers move by tap, so one kernel serves every stride,
// dilation and kernel size; long K runs in blocks (KBlock) over chunks of rows. The epilogue (bias,
// residual, clamp, activation) runs in registers, masked at C's edge.
// Compiled with -mavx512f (and the VNNI set); only called when the CPU reports AVX-512 (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>

#include "conv_rows.h"
#include "math_avx512.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

inline __mmask16 mask_of(int64_t cols) { return cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1); }

// `ep` is the tile's own copy: read through g, its fields would be reloaded after every store (a float store
// may alias them).
inline void store(__m512 v, int64_t m, int64_t j0, int64_t cols, const ConvF32Epilogue& ep, float* c, int64_t ldc) {
  const __mmask16 k = mask_of(cols);
  v = conv_epilogue512(v, k, ep.bias ? ep.bias + j0 : nullptr, ep.residual ? ep.residual + m * ep.ld_residual + j0 : nullptr, ep);
  _mm512_mask_storeu_ps(c + m * ldc + j0, k, v);
}

// A block of the K loop: taps [t0, t1), of each its values [c0, c1).
struct KBlock {
  int64_t t0, t1, c0, c1;
};

// Long K in blocks of about kBlockK values, whole taps or parts of one: a block of a panel pair's weights (32
// KB) stays in L1 while every row tile of a chunk of kChunkRows rows runs over it. Unblocked, each 8-row tile
// streamed the pair's whole K from L2 (576 KB for ResNet-50's 3x3 stride-2 512-channel layer).
constexpr int64_t kBlockK = 256, kChunkRows = 64;

template <typename Body>
void for_each_k_block(const ConvRows& r, const Body& body) {
  if (r.k_tap >= kBlockK) {
    for (int64_t t = 0; t < r.taps; ++t)
      for (int64_t c = 0; c < r.k_tap; c += kBlockK) body(KBlock{t, t + 1, c, std::min(r.k_tap, c + kBlockK)});
    return;
  }
  const int64_t per = std::max<int64_t>(1, kBlockK / r.k_tap);
  for (int64_t t = 0; t < r.taps; t += per) body(KBlock{t, std::min(r.taps, t + per), 0, r.k_tap});
}

// MR pixels by NP panels (1 or 2) starting at panel p, over the K block kb. Between blocks the sums wait in
// `sums` (MR rows of 32; null when kb is all of K): a block after the first starts from them, one before the
// last stores them there instead of running the epilogue. Each output stays one chain of FMAs in K order.
template <int MR, int NP>
void tile(const ConvGemmF32Args& g, int64_t m, int64_t p, const KBlock& kb, float* sums, bool first, bool last) {
  const ConvRows& r = g.a;
  const float* x = static_cast<const float*>(r.x);
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const int64_t panel_stride = r.taps * r.k_tap * 16;
  const float* w0 = g.w + p * panel_stride;
  const bool prefetch_next = (p + NP) * 16 >= g.n;
  // The epilogue's lines, asked for now so that they arrive during the K loop: the output for writing
  // (PREFETCHW: no read-for-ownership stall at the store) and a separate residual for reading. Short-K
  // tiles (1x1 convolutions) wait on them otherwise: ResNet-50 b8's 64->256 1x1 with its residual 10.4 ->
  // 9.1 ms (T=1); long-K tiles gain nothing, the lines could leave L1 before the epilogue.
  constexpr int64_t kPrefetchEpilogueMaxK = 512;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NP && last && r.taps * r.k_tap <= kPrefetchEpilogueMaxK; ++q) {
      __builtin_prefetch(g.c + (m + i) * g.ldc + (p + q) * 16, 1, 3);
      if (g.ep.residual && g.ep.residual != g.c)
        __builtin_prefetch(g.ep.residual + (m + i) * g.ep.ld_residual + (p + q) * 16, 0, 3);
    }
  __m512 acc[MR][NP];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NP; ++q) acc[i][q] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(sums + i * 32 + q * 16);
  for (int64_t t = kb.t0; t < kb.t1; ++t) {
    const float* a[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = x + base[i] + r.tap_off[t];
    const float* w = w0 + (t * r.k_tap + kb.c0) * 16;
    for (int64_t c = kb.c0; c < kb.c1; ++c, w += 16) {
      // Ask for the next tile's rows (MR pixels on) a line per row every 16 values, once per row block (from
      // its last panels): A streams from L3 or DRAM on large feature maps, and the hardware prefetchers miss
      // the row-interleaved reads (a 1x1 conv to 16 channels ran at half the FMA peak without this).
      if (prefetch_next && (c & 15) == 0) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) _mm_prefetch(reinterpret_cast<const char*>(a[i] + c + MR * r.cs), _MM_HINT_T0);
      }
      __m512 b[NP];
      for (int q = 0; q < NP; ++q) b[q] = _mm512_loadu_ps(w + q * panel_stride);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_set1_ps(a[i][c]);
        for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_fmadd_ps(av, b[q], acc[i][q]);
      }
    }
  }
  if (!last) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NP; ++q) _mm512_storeu_ps(sums + i * 32 + q * 16, acc[i][q]);
    return;
  }
  const ConvF32Epilogue ep = g.ep;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NP; ++q) store(acc[i][q], m + i, (p + q) * 16, panel_cols(g.n, p + q), ep, g.c, g.ldc);
}

template <int NP>
using TileFn = void (*)(const ConvGemmF32Args&, int64_t, int64_t, const KBlock&, float*, bool, bool);
template <int NP>
constexpr TileFn<NP> kTiles[kRows + 1] = {nullptr, tile<1, NP>, tile<2, NP>, tile<3, NP>, tile<4, NP>,
                                          tile<5, NP>, tile<6, NP>, tile<7, NP>, tile<8, NP>};

}  // namespace

void conv_gemm_f32_avx512_8x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmF32Args& g) {
  const ConvRows& r = g.a;
  const int64_t panel_bytes = r.taps * r.k_tap * 16 * 4;
  auto run = [&](int64_t m, int64_t rows, int64_t p, int64_t np, const KBlock& kb, float* sums, bool first, bool last) {
    (np == 2 ? kTiles<2>[rows] : kTiles<1>[rows])(g, m, p, kb, sums, first, last);
  };
  if (r.taps * r.k_tap <= kBlockK || conv_weights_in_cache(p1 - p0, panel_bytes)) {
    const KBlock all{0, r.taps, 0, r.k_tap};
    return for_each_conv_tile(m0, m1, p0, p1, kRows, 2, panel_bytes, [&](int64_t m, int64_t rows, int64_t p, int64_t np) {
      run(m, rows, p, np, all, nullptr, true, true);
    });
  }
  alignas(64) float partial[kChunkRows * 32];
  for (int64_t p = p0; p < p1; p += 2) {
    const int64_t np = std::min<int64_t>(2, p1 - p);
    for (int64_t c0 = m0; c0 < m1; c0 += kChunkRows) {
      const int64_t c1 = std::min(m1, c0 + kChunkRows);
      for_each_k_block(r, [&](const KBlock& kb) {
        const bool first = kb.t0 == 0 && kb.c0 == 0, last = kb.t1 == r.taps && kb.c1 == r.k_tap;
        for (int64_t m = c0; m < c1; m += kRows)
          run(m, std::min<int64_t>(kRows, c1 - m), p, np, kb, partial + (m - c0) * 32, first, last);
      });
    }
  }
}

}  // namespace optim::kernels
