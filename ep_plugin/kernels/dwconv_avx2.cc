// AVX2 depthwise NHWC convolutions (kernel_table.h) on the shared driver (dwconv_rows.h): 8 channels per
// ymm. Channel counts that are a multiple of 8 (every real network's) run on plain loads and stores; only
// a channel tail takes masked ones, which AMD's cores microcode (vmaskmovps measured 5x a plain load or
// store on a Zen EPYC). The int8 form sums exact integers in float32 and requantizes through qstore_avx2.h,
// equal to the scalar reference bit for bit. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "dwconv_rows.h"
#include "math_avx2.h"
#include "qstore_avx2.h"

namespace optim::kernels {
namespace {

// A block's lanes: Whole when all 8 channels exist, else a vector mask (lane i set when channel j + i exists).
struct Whole {};
struct Lanes {
  __m256i k;
};

inline __m256 load_lanes(Whole, const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_lanes(Lanes k, const float* p) { return _mm256_maskload_ps(p, k.k); }
inline void store_lanes(Whole, float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void store_lanes(Lanes k, float* p, __m256 v) { _mm256_maskstore_ps(p, k.k, v); }
inline int lanes_of(Whole) { return 8; }
inline int lanes_of(Lanes k) { return __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(k.k)))); }

template <typename M>
struct V256 {
  using Reg = __m256;
  using Mask = M;
  static constexpr int kLanes = 8;
  static constexpr bool kWhole = std::is_same_v<M, Whole>;
  static Mask mask_of(int64_t n) {
    if constexpr (kWhole) return Whole{};
    else
      return {n >= 8 ? _mm256_set1_epi32(-1)
                     : _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))};
  }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(Mask k, const float* p) { return load_lanes(k, p); }
  static Reg fma(Reg a, Reg b, Reg acc) { return _mm256_fmadd_ps(a, b, acc); }
};

// Runs body(V256<Whole>{}) when the channels fill whole blocks, else body(V256<Lanes>{}).
template <typename Body>
void by_channel_blocks(int64_t channels, const Body& body) {
  if (channels % 8 == 0) body(V256<Whole>{});
  else body(V256<Lanes>{});
}

}  // namespace

void dwconv_f32_avx2(int64_t m0, int64_t m1, const DwconvF32Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kDwMaxTaps) return dwconv_f32_scalar(m0, m1, a);
  const ConvF32Epilogue& ep = a.ep;
  const __m256 lo = _mm256_set1_ps(ep.lo), hi = _mm256_set1_ps(ep.hi);
  by_channel_blocks(g.channels, [&](auto v) {
    using V = decltype(v);
    using Mask = typename V::Mask;
    dw_drive<V>(
        g, {reinterpret_cast<const uint8_t*>(a.x), 4}, a.w, m0, m1, [&](int64_t i, int64_t j, Mask k) { return load_lanes(k, a.x + i + j); },
        [&](int64_t m, int64_t j, Mask k, __m256 acc) {
          if (ep.bias) acc = _mm256_add_ps(acc, load_lanes(k, ep.bias + j));
          if (ep.residual) acc = _mm256_add_ps(acc, load_lanes(k, ep.residual + m * ep.ld_residual + j));
          acc = _mm256_min_ps(hi, _mm256_max_ps(lo, acc));  // NaN stays (second operand)
          if (ep.has_act) acc = activation256(ep.act, ep.act_params, acc);
          store_lanes(k, a.c + (m - a.c_row0) * a.ldc + j, acc);
        });
  });
}

void dwconv_q8_avx2(int64_t m0, int64_t m1, const DwconvQ8Args& a) {
  const DwconvGeometry& g = a.g;
  if (g.kh * g.kw > kDwMaxTaps) return dwconv_q8_scalar(m0, m1, a);
  const QgemmEpilogue& ep = *a.ep;
  by_channel_blocks(g.channels, [&](auto v) {
    using V = decltype(v);
    using Mask = typename V::Mask;
    // The epilogue's values copied into the lambda: the outputs' byte stores may alias anything a pointer reaches,
    // so values read through `a` or `ep` would be loaded again (and branched on) for every pixel.
    const float* const scale = ep.scale_col;
    const float* const bias = ep.bias_col;
    void* const out = a.c;
    const int64_t ldc = a.ldc, channels = g.channels;
    const bool to_float = ep.out == QuantOut::kFloat32, centered16 = a.centered16, u8 = ep.out == QuantOut::kUint8;
    const CenteredClamp clamp(ep);
    const __m256i out_zero = _mm256_set1_epi32(ep.out_zero);
    auto finish = [=](int64_t m, int64_t j, Mask k, __m256 sums) OPTIM_INLINED {
      // The sums are exact integers below 2^24; the scalar epilogue's operations, in its order (centered8's).
      __m256 real = _mm256_mul_ps(sums, load_lanes(k, scale + j));
      if (bias) real = _mm256_add_ps(real, load_lanes(k, bias + j));
      const int64_t index = m * ldc + j;
      if (to_float) {
        store_lanes(k, static_cast<float*>(out) + index, real);
        return;
      }
      const __m256i q = clamp(real);  // q - zero
      if (centered16) {  // q - zero as int16 (within [-255, 255])
        const __m128i words = words8(q);
        int16_t* c16 = static_cast<int16_t*>(out) + index;
        if (V::kWhole || channels - j >= 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(c16), words);
        else {
          alignas(16) int16_t tail[8];
          _mm_store_si128(reinterpret_cast<__m128i*>(tail), words);
          std::memcpy(c16, tail, static_cast<size_t>(lanes_of(k)) * sizeof(int16_t));
        }
        return;
      }
      const __m128i bytes = bytes8(_mm256_add_epi32(q, out_zero), u8);
      uint8_t* c = static_cast<uint8_t*>(out) + index;
      if (V::kWhole || channels - j >= 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(c), bytes);
      } else {
        alignas(16) uint8_t tail[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(tail), bytes);
        std::memcpy(c, tail, static_cast<size_t>(lanes_of(k)));
      }
    };
    if (a.xq) {
      const __m256i zero = _mm256_set1_epi32(a.x_zero);
      const uint8_t* xq = a.xq;
      const bool s8 = a.x_signed;
      // Without a channel tail the load has no branch and is inlined into the unrolled windows (with the tail's
      // branch and copy inlined 51 times over, a 3x3 stride-2 window ran twice as slow as with the calls).
      auto without_tail = [&](auto signed_x) {
        return dw_drive<V>(g, {xq, 1}, a.w, m0, m1, [xq, zero](int64_t i, int64_t j, Mask) OPTIM_INLINED {
          const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xq + i + j));
          const __m256i x = decltype(signed_x)::value ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
          return _mm256_cvtepi32_ps(_mm256_sub_epi32(x, zero));
        }, finish);
      };
      if constexpr (V::kWhole) return s8 ? without_tail(std::true_type{}) : without_tail(std::false_type{});
      else
        return dw_drive<V>(g, {xq, 1}, a.w, m0, m1, [xq, zero, s8, channels](int64_t i, int64_t j, Mask) {
          __m128i b;
          if (channels - j >= 8) {
            b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xq + i + j));
          } else {  // the channels' tail: no byte past the tensor is read
            alignas(16) uint8_t tail[16] = {};
            std::memcpy(tail, xq + i + j, static_cast<size_t>(channels - j));
            b = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
          }
          const __m256i x = s8 ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
          return _mm256_cvtepi32_ps(_mm256_sub_epi32(x, zero));
        }, finish);
    }
    const float* const x = a.x;
    dw_drive<V>(
        g, {reinterpret_cast<const uint8_t*>(x), 4}, a.w, m0, m1,
        [x](int64_t i, int64_t j, Mask k) OPTIM_INLINED { return load_lanes(k, x + i + j); }, finish);
  });
}

}  // namespace optim::kernels
