// AVX-512 VNNI int8 GEMM: uint8 activations x int8 weights, vpdpbusd (four products summed into int32,
// exact), an 8x16 tile of zmm accumulators; the epilogue runs the scalar reference's float operations
// sixteen columns at a time. Compiled with -mavx512f -mavx512bw -mavx512vnni; only called when the CPU
// reports them (kernel_table.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "igemm_epilogue.h"

namespace optim::kernels {

namespace {

template <int MR>
inline void tile(int64_t kq, const uint8_t* a, int64_t lda, const int8_t* panel, int32_t* out /* MR x 16 */) {
  __m512i acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kq; ++q) {
    const __m512i b = _mm512_loadu_si512(panel + q * 64);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, sizeof(quad));
      acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(quad), b);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) _mm512_storeu_si512(out + r * 16, acc[r]);
}

// Sixteen columns j0..j0+15 of row i, all inside C.
inline void store16(const int32_t* acc, int64_t i, int64_t j0, const IgemmEpilogue& ep, void* c, int64_t index) {
  __m512 real = _mm512_cvtepi32_ps(_mm512_loadu_si512(acc));
  const __m512 scale = ep.scale_col ? _mm512_loadu_ps(ep.scale_col + j0)
                                    : _mm512_set1_ps(ep.scale_row ? ep.scale_row[i] : ep.scale);
  real = _mm512_mul_ps(real, scale);
  if (ep.bias_col) real = _mm512_add_ps(real, _mm512_loadu_ps(ep.bias_col + j0));
  if (ep.bias_row) real = _mm512_add_ps(real, _mm512_set1_ps(ep.bias_row[i]));
  if (ep.out == QuantOut::kFloat32) {
    _mm512_storeu_ps(static_cast<float*>(c) + index, real);
    return;
  }
  __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(real, _mm512_set1_ps(ep.inv_out_scale)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm512_add_ps(q, _mm512_set1_ps(static_cast<float>(ep.out_zero)));
  q = _mm512_max_ps(q, _mm512_set1_ps(static_cast<float>(ep.qmin)));  // NaN becomes qmin, as in the scalar code
  q = _mm512_min_ps(q, _mm512_set1_ps(static_cast<float>(ep.qmax)));
  const __m128i v8 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q));  // in range after the clamp: plain truncation
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(c) + index), v8);
}

inline void store_row(int32_t* acc, const int32_t* comp, int64_t i, int64_t j0, int64_t cols, const IgemmEpilogue& ep,
                      void* c, int64_t ldc) {
  for (int64_t j = 0; j < cols; ++j) acc[j] += comp[j0 + j];
  if (cols == kQuadNR) {
    store16(acc, i, j0, ep, c, i * ldc + j0);
    return;
  }
  for (int64_t j = 0; j < cols; ++j) igemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
}

}  // namespace

void igemm_u8s8_avx512vnni(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                           int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                           const IgemmEpilogue& ep) {
  alignas(64) int32_t acc[kQuadMR * kQuadNR];
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t* panel = b_packed + p * kq * 4 * kQuadNR;
    const int64_t j0 = p * kQuadNR;
    const int64_t cols = std::min<int64_t>(kQuadNR, n - j0);
    int64_t i = m0;
    for (; i + kQuadMR <= m1; i += kQuadMR) {
      tile<8>(kq, a + i * lda, lda, panel, acc);
      for (int r = 0; r < 8; ++r) store_row(acc + r * kQuadNR, comp_col, i + r, j0, cols, ep, c, ldc);
    }
    const int64_t rest = m1 - i;
    switch (rest) {
      case 7: tile<7>(kq, a + i * lda, lda, panel, acc); break;
      case 6: tile<6>(kq, a + i * lda, lda, panel, acc); break;
      case 5: tile<5>(kq, a + i * lda, lda, panel, acc); break;
      case 4: tile<4>(kq, a + i * lda, lda, panel, acc); break;
      case 3: tile<3>(kq, a + i * lda, lda, panel, acc); break;
      case 2: tile<2>(kq, a + i * lda, lda, panel, acc); break;
      case 1: tile<1>(kq, a + i * lda, lda, panel, acc); break;
      default: break;
    }
    for (int64_t r = 0; r < rest; ++r) store_row(acc + r * kQuadNR, comp_col, i + r, j0, cols, ep, c, ldc);
  }
}

}  // namespace optim::kernels
