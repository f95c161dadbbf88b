// AVX-512 VNNI NHWC int8 convolution GEMM, uint8 activations x int8 weights (kernel_table.h,
// ConvGemmQ8Args): 8 output pixels by 32 output channels (two quad panels, qgemm_u8s8_pack_b); per K quad
// one broadcast quad per pixel and two vpdpbusd per pixel (four u8 x s8 products summed into int32, exact),
// 16 zmm accumulators that start at the columns' zero-point compensation. The epilogue (store_pairs, or
// qstore_avx512.h's) equals the scalar reference bit for bit; with a folded QAdd (ConvQAdd) it runs the
// Add's operations too (store_pairs_qadd), equal to the scalar epilogue followed by qbinary_q8_scalar.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "conv_rows.h"
#include "qbinary_avx512.h"
#include "qstore_avx512.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

inline __mmask16 mask16(int64_t cols) { return cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1); }

// An MR x 32 tile's rows stored two at a time: words(i) gives row i's 32 results as QBinaryVec::words
// does (int16 lanes, zero point added; 128-bit lane L holds columns 4L.. then 16+4L..); the two rows'
// words are narrowed together (one pack, one dword permute) and stored as two 32-byte rows, instead of
// four narrowing moves and four 16-byte stores.
template <int MR, typename Words>
OPTIM_INLINED inline void store_row_pairs(const ConvGemmQ8Args& g, int64_t m, int64_t j0, int64_t cols, bool u8,
                                          const Words& words) {
  // After the pack, 128-bit lane L holds dwords (row i cols 4L.., row i cols 16+4L.., row i+1 the same).
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __mmask32 k = cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1;
  unrolled<(MR + 1) / 2>([&](auto pair) OPTIM_INLINED {
    constexpr int i = 2 * pair, i1 = i + 1 < MR ? i + 1 : i;
    const __m512i w0 = words(std::integral_constant<int, i>{});
    const __m512i w1 = i + 1 < MR ? words(std::integral_constant<int, i1>{}) : w0;
    const __m512i rows = _mm512_permutexvar_epi32(order, u8 ? _mm512_packus_epi16(w0, w1) : _mm512_packs_epi16(w0, w1));
    uint8_t* c = static_cast<uint8_t*>(g.c) + (m + i) * g.ldc + j0;
    const __m256i first = _mm512_castsi512_si256(rows);
    if (cols >= 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), first);
    else _mm256_mask_storeu_epi8(c, k, first);
    if constexpr (i + 1 < MR) {
      const __m256i second = _mm512_extracti64x4_epi64(rows, 1);
      if (cols >= 32) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + g.ldc), second);
      else _mm256_mask_storeu_epi8(c + g.ldc, k, second);
    }
  });
}

// The per-column scales and biases of panels p and p + 1 (zero past C's edge).
struct PanelPair {
  __m512 scale[2], bias[2];
  OPTIM_INLINED PanelPair(const ConvGemmQ8Args& g, const QgemmEpilogue& ep, int64_t p) {
    for (int q = 0; q < 2; ++q) {
      const int64_t j = (p + q) * 16;
      const __mmask16 k = mask16(panel_cols(g.n, p + q));
      scale[q] = _mm512_maskz_loadu_ps(k, ep.scale_col + j);
      bias[q] = ep.bias_col ? _mm512_maskz_loadu_ps(k, ep.bias_col + j) : _mm512_setzero_ps();
    }
  }
  OPTIM_INLINED __m512 real(__m512i sums, int q, bool has_bias) const {
    const __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), scale[q]);
    return has_bias ? _mm512_add_ps(r, bias[q]) : r;
  }
};

// The integer epilogue of an MR x 32 tile. Equal to qgemm_store bit for bit: the real values are clamped
// above at qmax - zero (min with the bound first returns NaN as NaN), rounded half to even, and the zero
// point added with int16 saturation; the saturating packs then clamp below at the type's minimum, which
// NaN (converted to INT32_MIN) and large negative values reach, as in qgemm_store. Only a raised floor (a
// fused Relu) needs the explicit max, which maps NaN to the floor too.
template <int MR>
OPTIM_INLINED inline void store_pairs(const ConvGemmQ8Args& g, const QgemmEpilogue& ep, const __m512i (&acc)[MR][2],
                                      int64_t m, int64_t p) {
  const PanelPair pp(g, ep, p);
  const bool has_bias = ep.bias_col, u8 = ep.out == QuantOut::kUint8, floor_raised = ep.qmin > (u8 ? 0 : -128);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(ep.qmin - ep.out_zero));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(ep.qmax - ep.out_zero));
  const __m512i zero = _mm512_set1_epi16(static_cast<int16_t>(ep.out_zero));
  auto half = [&](__m512i sums, int q) OPTIM_INLINED {
    __m512 real = pp.real(sums, q, has_bias);
    if (floor_raised) real = _mm512_max_ps(real, lo);
    return _mm512_cvt_roundps_epi32(_mm512_min_ps(hi, real), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  };
  const int64_t cols = panel_cols(g.n, p) + panel_cols(g.n, p + 1);
  store_row_pairs<MR>(g, m, p * 16, cols, u8, [&](auto i) OPTIM_INLINED {
    return _mm512_adds_epi16(_mm512_packs_epi32(half(acc[i][0], 0), half(acc[i][1], 1)), zero);
  });
}

// The epilogue of an MR x 32 tile with a folded QAdd (ConvQAdd): each value quantized as in store_pairs,
// kept as the float integer q - out_zero (clamped at both bounds, NaN to the floor, rounded half to even:
// qgemm_store's integer), which is the Add's (a - za) since za is out_zero; then the Add's operations with
// the other operand (QBinaryVec), the Add's result stored. The unit's own bytes are never written.
template <int MR>
OPTIM_INLINED inline void store_pairs_qadd(const ConvGemmQ8Args& g, const QgemmEpilogue& ep,
                                           const __m512i (&acc)[MR][2], int64_t m, int64_t p) {
  const PanelPair pp(g, ep, p);
  const ConvQAdd& add = *g.add;
  const QBinaryVec v(add.p);
  const bool has_bias = ep.bias_col, other_u8 = add.p.b_u8;
  const int32_t zb = add.p.zb;
  const __m512 lo = _mm512_set1_ps(static_cast<float>(ep.qmin - ep.out_zero));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(ep.qmax - ep.out_zero));
  const int64_t j0 = p * 16, cols = panel_cols(g.n, p) + panel_cols(g.n, p + 1);
  const __mmask32 k = cols >= 32 ? ~__mmask32(0) : (__mmask32(1) << cols) - 1;
  store_row_pairs<MR>(g, m, j0, cols, add.p.y_u8, [&](auto i) OPTIM_INLINED {
    const uint8_t* o = static_cast<const uint8_t*>(add.other) + (m + i) * add.ldo + j0;
    const __m256i ob = _mm256_maskz_loadu_epi8(k, o);
    auto half = [&](__m512i sums, int q, __m128i other) OPTIM_INLINED {
      const __m512 own = _mm512_roundscale_ps(_mm512_min_ps(hi, _mm512_max_ps(pp.real(sums, q, has_bias), lo)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return v.result16<false>(_mm512_mul_ps(own, v.sa), _mm512_mul_ps(widen16(other, other_u8, zb), v.sb));
    };
    return v.words(half(acc[i][0], 0, _mm256_castsi256_si128(ob)),
                   half(acc[i][1], 1, _mm256_extracti128_si256(ob, 1)));
  });
}

// A folded QAdd on a tile already stored by another epilogue: in place, sixteen columns at a time.
inline void qadd_in_place(const ConvGemmQ8Args& g, int64_t m, int64_t rows, int64_t p, int64_t np) {
  const ConvQAdd& add = *g.add;
  const QBinaryVec v(add.p);
  for (int64_t i = m; i < m + rows; ++i)
    for (int64_t q = p; q < p + np; ++q) {
      uint8_t* c = static_cast<uint8_t*>(g.c) + i * g.ldc + q * 16;
      qbinary16(c, static_cast<const uint8_t*>(add.other) + i * add.ldo + q * 16, add.p, v, c, panel_cols(g.n, q));
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
  // compensation. Any other epilogue goes through store_row, which adds it. The accumulators are only ever
  // indexed by constants (unrolled.h): one loop-indexed access and GCC keeps all of them on the stack,
  // storing and reloading the 16 vectors around every tile's K loop.
  const bool per_column = ep.scale_col && !ep.scale_row && !ep.bias_row;
  __m512i acc[MR][NP];
  unrolled<NP>([&](auto q) OPTIM_INLINED {
    const __m512i comp = per_column
                             ? _mm512_maskz_loadu_epi32(mask16(panel_cols(g.n, p + q)), g.comp_col + (p + q) * 16)
                             : _mm512_setzero_si512();
    unrolled<MR>([&](auto i) OPTIM_INLINED { acc[i][q] = comp; });
  });
  for (int64_t t = 0; t < r.taps; ++t) {
    const uint8_t* a[MR];
    unrolled<MR>([&](auto i) OPTIM_INLINED { a[i] = x + base[i] + r.tap_off[t]; });
    for (int64_t k = 0; k < kq_tap; ++k, w += 64) {
      __m512i b[NP];
      unrolled<NP>([&](auto q) OPTIM_INLINED { b[q] = _mm512_loadu_si512(w + q * panel_stride); });
      unrolled<MR>([&](auto i) OPTIM_INLINED {
        int32_t quad;
        std::memcpy(&quad, a[i] + 4 * k, sizeof(quad));
        const __m512i av = _mm512_set1_epi32(quad);
        unrolled<NP>([&](auto q) OPTIM_INLINED { acc[i][q] = _mm512_dpbusd_epi32(acc[i][q], av, b[q]); });
      });
    }
  }
  if (!per_column) {
    alignas(64) int32_t out[MR][NP][16];
    unrolled<MR>([&](auto i) OPTIM_INLINED {
      unrolled<NP>([&](auto q) OPTIM_INLINED { _mm512_store_si512(out[i][q], acc[i][q]); });
    });
    for (int i = 0; i < MR; ++i)
      for (int q = 0; q < NP; ++q)
        store_row(out[i][q], g.comp_col, m + i, (p + q) * 16, panel_cols(g.n, p + q), ep, g.c, g.ldc);
    if (g.add) qadd_in_place(g, m, MR, p, NP);
    return;
  }
  if constexpr (NP == 2) {
    if (ep.out != QuantOut::kFloat32)
      return g.add ? store_pairs_qadd<MR>(g, ep, acc, m, p) : store_pairs<MR>(g, ep, acc, m, p);
  }
  // Per panel the columns' scale and bias, then every row in registers.
  unrolled<NP>([&](auto q) OPTIM_INLINED {
    const int64_t j0 = (p + q) * 16;
    const __mmask16 k = mask16(panel_cols(g.n, p + q));
    const __m512 scale = _mm512_maskz_loadu_ps(k, ep.scale_col + j0);
    const float* bias = ep.bias_col ? ep.bias_col + j0 : nullptr;
    unrolled<MR>([&](auto i) OPTIM_INLINED {
      requantize16(_mm512_cvtepi32_ps(acc[i][q]), scale, bias, k, ep, g.c, (m + i) * g.ldc + j0);
    });
  });
  if (g.add) qadd_in_place(g, m, MR, p, NP);
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
