// The int8 GEMM epilogue (qgemm_epilogue.h) for eight columns at a time, in AVX2: the scalar
// operations in the same order, so the results equal the scalar reference bit for bit. Included only
// by files compiled with -mavx2 -mfma.
#pragma once

#include <immintrin.h>

#include "qgemm_epilogue.h"
#include "unrolled.h"

namespace optim::kernels {
namespace {  // internal linkage, as in qgemm_epilogue.h

// Rounds to int32 in MXCSR's mode, as the scalar reference's std::nearbyint does: half to even unless a host
// changed the mode, in which case both change alike. One vcvtps2dq, where vroundps + vcvttps2dq take three uops.
inline __m256i round_to_int32(__m256 v) { return _mm256_cvtps_epi32(v); }

// Eight real values of an integer output as int32 q - zero: saturated to [qmin - zero, qmax - zero] and rounded.
// Clamping before rounding equals rounding first (the bounds are integers); max returns its second operand for
// NaN, so NaN becomes qmin - zero as in the scalar code. The centered outputs store these as they are. The bounds
// live in registers, so loops that store many vectors build one clamp and keep it.
struct CenteredClamp {
  explicit CenteredClamp(const QgemmEpilogue& ep)
      : lo(_mm256_set1_ps(static_cast<float>(ep.qmin - ep.out_zero))),
        hi(_mm256_set1_ps(static_cast<float>(ep.qmax - ep.out_zero))) {}
  __m256i operator()(__m256 real) const { return round_to_int32(_mm256_min_ps(_mm256_max_ps(real, lo), hi)); }
  __m256 lo, hi;
};

inline __m256i centered8(__m256 real, const QgemmEpilogue& ep) { return CenteredClamp(ep)(real); }

// The same shifted by the zero point: q itself (the integer add is exact).
inline __m256i quantize8(__m256 real, const QgemmEpilogue& ep) {
  return _mm256_add_epi32(centered8(real, ep), _mm256_set1_epi32(ep.out_zero));
}

// Eight int32 values inside int16's range as int16 (the saturating pack keeps them).
inline __m128i words8(__m256i v) { return _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)); }

// Eight int32 values inside the output type's range as its bytes (twice: the low 8 bytes are the ones to store).
inline __m128i bytes8(__m256i v, bool u8) {
  const __m128i v16 = words8(v);
  return u8 ? _mm_packus_epi16(v16, v16) : _mm_packs_epi16(v16, v16);
}
inline __m128i bytes8(__m256i v, const QgemmEpilogue& ep) { return bytes8(v, ep.out == QuantOut::kUint8); }

// Eight columns j0..j0+7 of row i, all inside C, from their sums: the scalar epilogue's operations, vectorized.
inline void store8_sums(__m256i sums, int64_t i, int64_t j0, const QgemmEpilogue& ep, void* c, int64_t index) {
  if (ep.raw_sums) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int32_t*>(c) + index), sums);
    return;
  }
  __m256 real = _mm256_cvtepi32_ps(sums);
  const __m256 scale = ep.scale_col ? _mm256_loadu_ps(ep.scale_col + j0)
                                    : _mm256_set1_ps(ep.scale_row ? ep.scale_row[i] : ep.scale);
  real = _mm256_mul_ps(real, scale);
  if (ep.bias_col) real = _mm256_add_ps(real, _mm256_loadu_ps(ep.bias_col + j0));
  if (ep.bias_row) real = _mm256_add_ps(real, _mm256_set1_ps(ep.bias_row[i]));
  if (ep.out == QuantOut::kFloat32) {
    _mm256_storeu_ps(static_cast<float*>(c) + index, real);
    return;
  }
  if (ep.centered_float) {
    _mm256_storeu_ps(static_cast<float*>(c) + index, _mm256_cvtepi32_ps(centered8(real, ep)));
    return;
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(c) + index), bytes8(quantize8(real, ep), ep));
}

inline void store8(const int32_t* acc, int64_t i, int64_t j0, const QgemmEpilogue& ep, void* c, int64_t index) {
  store8_sums(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)), i, j0, ep, c, index);
}

inline void store_row(const int32_t* acc, int64_t i, int64_t j0, int64_t cols, const QgemmEpilogue& ep, void* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) store8(acc + j, i, j0 + j, ep, c, i * ldc + j0 + j);
  for (; j < cols; ++j) qgemm_store(acc[j], i, j0 + j, ep, c, i * ldc + j0 + j);
}

// Sixteen columns j0..j0+15 with per-column scales, requantized and stored from registers (the constants loaded
// once, for every row stored). Equal to qgemm_store bit for bit: the real values are clamped above at qmax - zero
// (min with the bound first keeps NaN NaN), rounded (round_to_int32: NaN and large negative values to INT32_MIN);
// the saturating packs and the int16 add of the zero point then clamp below at the type's minimum, where NaN
// lands as in qgemm_store. Only a raised floor (a fused Relu) needs the explicit max, which maps NaN to the floor
// too.
class PanelStore {
 public:
  // Whether an epilogue is one it stores: per-column scales (every convolution with per-channel weights), no
  // per-row terms, quantized or float outputs (not raw sums).
  static bool suits(const QgemmEpilogue& ep) {
    return ep.scale_col && !ep.scale_row && !ep.bias_row && !ep.acc_row && !ep.raw_sums;
  }
  OPTIM_INLINED PanelStore(const QgemmEpilogue& ep, int64_t j0)
      : s0_(_mm256_loadu_ps(ep.scale_col + j0)), s1_(_mm256_loadu_ps(ep.scale_col + j0 + 8)),
        has_bias_(ep.bias_col != nullptr),
        b0_(has_bias_ ? _mm256_loadu_ps(ep.bias_col + j0) : _mm256_setzero_ps()),
        b1_(has_bias_ ? _mm256_loadu_ps(ep.bias_col + j0 + 8) : _mm256_setzero_ps()),
        to_float_(ep.out == QuantOut::kFloat32), centered_float_(ep.centered_float), u8_(ep.out == QuantOut::kUint8),
        floor_raised_(ep.qmin > (u8_ ? 0 : -128)),
        clamp_(ep), zero_(_mm256_set1_epi16(static_cast<int16_t>(ep.out_zero))) {}

  // Sums of columns j0..j0+7 (acc0) and j0+8..j0+15 (acc1) into C's elements at..at+15.
  OPTIM_INLINED void store(__m256i acc0, __m256i acc1, void* c, int64_t at) const {
    const __m256 r0 = real(acc0, s0_, b0_), r1 = real(acc1, s1_, b1_);
    if (to_float_) {
      _mm256_storeu_ps(static_cast<float*>(c) + at, r0);
      _mm256_storeu_ps(static_cast<float*>(c) + at + 8, r1);
      return;
    }
    if (centered_float_) {  // q - zero: both bounds explicit (no pack saturates the floor here; centered8's steps)
      _mm256_storeu_ps(static_cast<float*>(c) + at, _mm256_cvtepi32_ps(centered(r0)));
      _mm256_storeu_ps(static_cast<float*>(c) + at + 8, _mm256_cvtepi32_ps(centered(r1)));
      return;
    }
    // The packs work within 128-bit lanes: words [r0 0-3, r1 0-3 | r0 4-7, r1 4-7], then bytes with each lane's
    // eight twice; the dword permute puts columns 0-15 in the low half (two shuffles fewer than by halves).
    const __m256i words = _mm256_adds_epi16(_mm256_packs_epi32(quantized(r0), quantized(r1)), zero_);
    const __m256i bytes = u8_ ? _mm256_packus_epi16(words, words) : _mm256_packs_epi16(words, words);
    const __m256i column_order = _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(c) + at),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(bytes, column_order)));
  }

 private:
  OPTIM_INLINED __m256 real(__m256i sums, __m256 scale, __m256 bias) const {
    const __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scale);
    return has_bias_ ? _mm256_add_ps(r, bias) : r;
  }
  OPTIM_INLINED __m256i centered(__m256 r) const { return clamp_(r); }
  OPTIM_INLINED __m256i quantized(__m256 r) const {
    if (floor_raised_) r = _mm256_max_ps(r, clamp_.lo);
    return round_to_int32(_mm256_min_ps(clamp_.hi, r));  // hi first: NaN stays NaN (see above)
  }

  // The epilogue's values, copied: C's stores may alias what a reference points at, so fields read through one
  // would be loaded again (and branched on) for every row stored.
  __m256 s0_, s1_;
  bool has_bias_;
  __m256 b0_, b1_;
  bool to_float_, centered_float_, u8_, floor_raised_;
  CenteredClamp clamp_;
  __m256i zero_;
};

// Rows m.. of a full 16-column panel with per-column scales (PanelStore).
template <int MR>
OPTIM_INLINED inline void store_panel(const ConvGemmQ8Args& g, const QgemmEpilogue& ep, const __m256i (&acc)[MR][2],
                                      int64_t m, int64_t j0) {
  const PanelStore panel(ep, j0);
  void* const c = g.c;  // loaded once: each row's stores may alias g
  const int64_t ldc = g.ldc;
  unrolled<MR>([&](auto i) OPTIM_INLINED { panel.store(acc[i][0], acc[i][1], c, (m + i) * ldc + j0); });
}

}  // namespace
}  // namespace optim::kernels
