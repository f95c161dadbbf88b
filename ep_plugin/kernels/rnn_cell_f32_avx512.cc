// AVX-512 recurrent cells (kernel_table.h, RnnCellFn): rnn_cell_body.h on a whole chunk (16 units) at a time,
// sigmoid and tanh from math_avx512.h; plain vectors' last units masked. Compiled with -mavx512f (and the VNNI
// set).
#include <immintrin.h>

#include "math_avx512.h"
#include "rnn_cell_body.h"

namespace optim::kernels {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int64_t kWidth = 16;
  struct Lanes {
    explicit Lanes(int64_t count) : mask(static_cast<__mmask16>(count >= kWidth ? 0xFFFF : (1u << count) - 1)) {}
    __m512 load(const float* p) const { return _mm512_maskz_loadu_ps(mask, p); }
    void store(float* p, __m512 v) const { _mm512_mask_storeu_ps(p, mask, v); }
    __mmask16 mask;
  };
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 set1(float v) { return _mm512_set1_ps(v); }
  static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  // max/min return their second operand when either is NaN: NaN in v comes through both.
  static __m512 clip(__m512 v, __m512 lo, __m512 hi) { return _mm512_min_ps(hi, _mm512_max_ps(lo, v)); }
  static __m512 sigmoid(__m512 v) { return sigmoid512(v); }
  static __m512 tanh(__m512 v) { return tanh512(v); }
};

}  // namespace

void rnn_cell_f32_avx512(RnnCell cell, const RnnCellArgs& a) { rnn_cell_kernel<Avx512>(cell, a); }

}  // namespace optim::kernels
