// AVX-512 VNNI NHWC int8 convolution GEMM, uint8 activations x int8 weights (kernel_table.h,
// ConvGemmQ8Args): 8 output pixels by 32 output channels (two quad panels, qgemm_u8s8_pack_b); per K quad
// one broadcast quad per pixel and two vpdpbusd per pixel (four u8 x s8 products summed into int32, exact),
// 16 zmm accumulators. The zero-point compensation and qstore_avx512.h's epilogue follow, so results equal
// the scalar reference bit for bit. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_rows.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

inline __mmask16 mask16(int64_t cols) { return cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1); }

template <int MR, int NP>
void tile(const ConvGemmQ8Args& g, int64_t m, int64_t p) {
  const ConvRows& r = g.a;
  const uint8_t* x = static_cast<const uint8_t*>(r.x);
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const int64_t kq_tap = r.k_tap / 4;
  const int64_t panel_stride = r.taps * kq_tap * 64;
  const int8_t* w = static_cast<const int8_t*>(g.w) + p * panel_stride;
  __m512i acc[MR][NP];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_setzero_si512();
  for (int64_t t = 0; t < r.taps; ++t) {
    const uint8_t* a[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = x + base[i] + r.tap_off[t];
    for (int64_t k = 0; k < kq_tap; ++k, w += 64) {
      __m512i b[NP];
      for (int q = 0; q < NP; ++q) b[q] = _mm512_loadu_si512(w + q * panel_stride);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        int32_t quad;
        std::memcpy(&quad, a[i] + 4 * k, sizeof(quad));
        const __m512i av = _mm512_set1_epi32(quad);
        for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_dpbusd_epi32(acc[i][q], av, b[q]);
      }
    }
  }
  const QgemmEpilogue& ep = *g.ep;
  if (!ep.scale_col || ep.scale_row || ep.bias_row) {  // not the convolution's per-column epilogue
    alignas(64) int32_t out[16];
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NP; ++q) {
        _mm512_store_si512(out, acc[i][q]);
        store_row(out, g.comp_col, m + i, (p + q) * 16, panel_cols(g.n, p + q), ep, g.c, g.ldc);
      }
    return;
  }
  // Per panel the columns' compensation, scale and bias, then every row in registers.
  for (int q = 0; q < NP; ++q) {
    const int64_t j0 = (p + q) * 16;
    const __mmask16 k = mask16(panel_cols(g.n, p + q));
    const __m512i comp = _mm512_maskz_loadu_epi32(k, g.comp_col + j0);
    const __m512 scale = _mm512_maskz_loadu_ps(k, ep.scale_col + j0);
    const float* bias = ep.bias_col ? ep.bias_col + j0 : nullptr;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) requantize16(acc[i][q], comp, scale, bias, k, ep, g.c, (m + i) * g.ldc + j0);
  }
}

template <int NP>
using TileFn = void (*)(const ConvGemmQ8Args&, int64_t, int64_t);
template <int NP>
constexpr TileFn<NP> kTiles[kRows + 1] = {nullptr, tile<1, NP>, tile<2, NP>, tile<3, NP>, tile<4, NP>,
                                          tile<5, NP>, tile<6, NP>, tile<7, NP>, tile<8, NP>};

}  // namespace

void conv_gemm_u8s8_avx512vnni_8x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  for_each_conv_tile(m0, m1, p0, p1, kRows, 2, g.a.taps * g.a.k_tap * 16,
                     [&](int64_t m, int64_t rows, int64_t p, int64_t np) { (np == 2 ? kTiles<2>[rows] : kTiles<1>[rows])(g, m, p); });
}

}  // namespace optim::kernels
