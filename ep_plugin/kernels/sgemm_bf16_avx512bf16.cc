// AVX512-BF16 GEMM (kernel_table.h, SgemmBf16Fn) and A's conversion to bf16 rows (vcvtne2ps2bf16, 32 values a
// step): 8 rows by 2 panels (32 columns) in 16 zmm accumulators; per K
// pair two panel loads and 8 broadcast bf16 pairs of A feed 16 vdpbf16ps (32 multiply-adds each). Sums in float32
// in the instruction's order as Intel defines it, which the scalar reference follows (bit for bit on a Xeon with
// AMX; tests allow float32 rounding, another design may round a pair once). Where vdpbf16ps runs at half
// the FMA rate (Sapphire Rapids) this is no faster than float32: its use is AVX512-BF16 CPUs without AMX.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; only called where the CPU reports AVX512-BF16.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "sgemm_store_avx512.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {

constexpr int kRows = 8;

// An MR x (NP * 16) tile's sums over all K pairs, held in registers (constant indices only: unrolled.h).
template <int MR, int NP>
void tile(int64_t kp, const uint16_t* a, int64_t lda, const uint16_t* panel, int64_t panel_elems, float* out) {
  __m512 c[MR][NP];
  unrolled<MR>([&](auto r) OPTIM_INLINED { unrolled<NP>([&](auto p) OPTIM_INLINED { c[r][p] = _mm512_setzero_ps(); }); });
  for (int64_t q = 0; q < kp; ++q) {
    __m512bh b[NP];
    unrolled<NP>([&](auto p) OPTIM_INLINED {
      const __m512i w = _mm512_loadu_si512(panel + p * panel_elems + q * 2 * kSgemmNR);
      std::memcpy(&b[p], &w, sizeof w);
    });
    unrolled<MR>([&](auto r) OPTIM_INLINED {
      int32_t bits;
      std::memcpy(&bits, a + r * lda + 2 * q, sizeof bits);
      const __m512i pair = _mm512_set1_epi32(bits);
      __m512bh av;
      std::memcpy(&av, &pair, sizeof pair);
      unrolled<NP>([&](auto p) OPTIM_INLINED { c[r][p] = _mm512_dpbf16_ps(c[r][p], av, b[p]); });
    });
  }
  unrolled<MR>([&](auto r) OPTIM_INLINED {
    unrolled<NP>([&](auto p) OPTIM_INLINED { _mm512_store_ps(out + (r * 2 + p) * kSgemmNR, c[r][p]); });
  });
}

template <int NP>
using TileFn = void (*)(int64_t, const uint16_t*, int64_t, const uint16_t*, int64_t, float*);
template <int NP>
constexpr TileFn<NP> kTiles[kRows + 1] = {nullptr, tile<1, NP>, tile<2, NP>, tile<3, NP>, tile<4, NP>,
                                          tile<5, NP>, tile<6, NP>, tile<7, NP>, tile<8, NP>};

}  // namespace

void convert_bf16_avx512bf16(const float* a, int64_t lda, int64_t k, int64_t r0, int64_t r1, uint16_t* dst) {
  const int64_t row = sgemm_bf16_row(k);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t k0 = 0; k0 < row; k0 += 32) {  // 32 floats, two zmm, to one zmm of bf16 (zero past k)
      const int64_t left = std::max<int64_t>(0, std::min<int64_t>(32, k - k0));
      const __mmask16 lo = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
      const __mmask16 hi = static_cast<__mmask16>(left >= 32 ? 0xFFFF : left > 16 ? (1u << (left - 16)) - 1 : 0);
      const float* in = a + r * lda + k0;
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, in + 16), _mm512_maskz_loadu_ps(lo, in));
      __m512i bits;
      std::memcpy(&bits, &v, sizeof bits);
      _mm512_storeu_si512(dst + r * row + k0, bits);
    }
}

void sgemm_bf16_avx512bf16_8x32(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const uint16_t* a,
                                int64_t lda, const uint16_t* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep) {
  const int64_t kp = (k + 1) / 2, panel_elems = sgemm_bf16_panel_pairs(k) * 2 * kSgemmNR;
  alignas(64) float out[kRows * 2 * kSgemmNR];
  for (int64_t p = p0; p < p1;) {
    const int np = p + 1 < p1 ? 2 : 1;
    const uint16_t* panel = b_packed + p * panel_elems;
    for (int64_t i = m0; i < m1; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m1 - i);
      (np == 2 ? kTiles<2>[rows] : kTiles<1>[rows])(kp, a + i * lda, lda, panel, panel_elems, out);
      for (int h = 0; h < np; ++h) {
        const int64_t j0 = (p + h) * kSgemmNR, cols = std::min<int64_t>(kSgemmNR, n - j0);
        for (int64_t r = 0; r < rows; ++r)
          store_row(out + (r * 2 + h) * kSgemmNR, c + (i + r) * ldc + j0, i + r, j0, cols, ep);
      }
    }
    p += np;
  }
}

}  // namespace optim::kernels
