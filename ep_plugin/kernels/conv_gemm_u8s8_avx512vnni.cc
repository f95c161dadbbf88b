// AVX-512 VNNI NHWC int8 convolution GEMM, uint8 activations x int8 weights (kernel_table.h,
// ConvGemmQ8Args): 8 output pixels by 32 output channels (two quad panels, qgemm_u8s8_pack_b); per K quad
// one broadcast quad per pixel and two vpdpbusd per pixel (four u8 x s8 products summed into int32, exact),
// 16 zmm accumulators that start at the columns' zero-point compensation. The epilogue (store_pairs, or
// qstore_avx512.h's) equals the scalar reference bit for bit. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_rows.h"
#include "qstore_avx512.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

inline __mmask16 mask16(int64_t cols) { return cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1); }

// The integer epilogue of an MR x 32 tile, two rows at a time: the four vectors of a row pair narrowed
// together (pack to int16, pack to bytes, one dword permute) and stored as two 32-byte rows, instead of
// four narrowing moves and four 16-byte stores. Equal to qgemm_store bit for bit: the real values are
// clamped above at qmax - zero (min with the bound first returns NaN as NaN), rounded half to even, and
// the zero point added with int16 saturation; the saturating packs then clamp below at the type's
// minimum, which NaN (converted to INT32_MIN) and large negative values reach, as in qgemm_store. Only a
// raised floor (a fused Relu) needs the explicit max, which maps NaN to the floor too.
template <int MR>
inline void store_pairs(const ConvGemmQ8Args& g, const QgemmEpilogue& ep, const __m512i (&acc)[MR][2], int64_t m, int64_t p) {
  const int64_t cols = panel_cols(g.n, p) + panel_cols(g.n, p + 1), j0 = p * 16;
  const __mmask16 k0 = mask16(panel_cols(g.n, p)), k1 = mask16(panel_cols(g.n, p + 1));
  const __m512 scale[2] = {_mm512_maskz_loadu_ps(k0, ep.scale_col + j0), _mm512_maskz_loadu_ps(k1, ep.scale_col + j0 + 16)};
  __m512 bias[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if (ep.bias_col) bias[0] = _mm512_maskz_loadu_ps(k0, ep.bias_col + j0), bias[1] = _mm512_maskz_loadu_ps(k1, ep.bias_col + j0 + 16);
  // After the packs, 128-bit lane L holds dwords (row i cols 4L.., row i cols 16+4L.., row i+1 the same).
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __mmask32 k = cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1;
  const bool floor_raised = ep.qmin > (ep.out == QuantOut::kUint8 ? 0 : -128);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(ep.qmin - ep.out_zero));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(ep.qmax - ep.out_zero));
  const __m512i zero = _mm512_set1_epi16(static_cast<int16_t>(ep.out_zero));
  auto row16 = [&](int i) {
    __m512i v[2];
    for (int q = 0; q < 2; ++q) {
      __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][q]), scale[q]);
      if (ep.bias_col) real = _mm512_add_ps(real, bias[q]);
      if (floor_raised) real = _mm512_max_ps(real, lo);
      v[q] = _mm512_cvt_roundps_epi32(_mm512_min_ps(hi, real), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    return _mm512_adds_epi16(_mm512_packs_epi32(v[0], v[1]), zero);
  };
#pragma GCC unroll 4
  for (int i = 0; i < MR; i += 2) {
    const __m512i w0 = row16(i), w1 = i + 1 < MR ? row16(i + 1) : w0;
    const __m512i b = ep.out == QuantOut::kUint8 ? _mm512_packus_epi16(w0, w1) : _mm512_packs_epi16(w0, w1);
    const __m512i rows = _mm512_permutexvar_epi32(order, b);
    uint8_t* c = static_cast<uint8_t*>(g.c) + (m + i) * g.ldc + j0;
    const __m256i lo = _mm512_castsi512_si256(rows);
    if (cols >= 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), lo);
    else _mm256_mask_storeu_epi8(c, k, lo);
    if (i + 1 >= MR) break;
    const __m256i hi = _mm512_extracti64x4_epi64(rows, 1);
    if (cols >= 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + g.ldc), hi);
    else _mm256_mask_storeu_epi8(c + g.ldc, k, hi);
  }
}

template <int MR, int NP>
void tile(const ConvGemmQ8Args& g, int64_t m, int64_t p) {
  const ConvRows& r = g.a;
  const uint8_t* x = static_cast<const uint8_t*>(r.x);
  int64_t base[MR];
  conv_row_bases(r, m, MR, base);
  const int64_t kq_tap = r.k_tap / 4;
  const int64_t panel_stride = r.taps * kq_tap * 64;
  const int8_t* w = static_cast<const int8_t*>(g.w) + p * panel_stride;
  const QgemmEpilogue& ep = *g.ep;
  // The convolution's per-column epilogue stays in registers: its sums start at the columns' zero-point
  // compensation. Any other epilogue goes through store_row, which adds it.
  const bool per_column = ep.scale_col && !ep.scale_row && !ep.bias_row;
  __m512i acc[MR][NP];
  for (int q = 0; q < NP; ++q) {
    const __m512i comp = per_column ? _mm512_maskz_loadu_epi32(mask16(panel_cols(g.n, p + q)), g.comp_col + (p + q) * 16)
                                    : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) acc[i][q] = comp;
  }
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
  if (!per_column) {
    alignas(64) int32_t out[16];
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NP; ++q) {
        _mm512_store_si512(out, acc[i][q]);
        store_row(out, g.comp_col, m + i, (p + q) * 16, panel_cols(g.n, p + q), ep, g.c, g.ldc);
      }
    return;
  }
  if constexpr (NP == 2) {
    if (ep.out != QuantOut::kFloat32) return store_pairs<MR>(g, ep, acc, m, p);
  }
  // Per panel the columns' scale and bias, then every row in registers.
  for (int q = 0; q < NP; ++q) {
    const int64_t j0 = (p + q) * 16;
    const __mmask16 k = mask16(panel_cols(g.n, p + q));
    const __m512 scale = _mm512_maskz_loadu_ps(k, ep.scale_col + j0);
    const float* bias = ep.bias_col ? ep.bias_col + j0 : nullptr;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) requantize16(_mm512_cvtepi32_ps(acc[i][q]), scale, bias, k, ep, g.c, (m + i) * g.ldc + j0);
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
