// AVX2 recurrent cells (kernel_table.h, RnnCellFn): rnn_cell_body.h on 8 units at a time (half a chunk),
// sigmoid and tanh from math_avx2.h; plain vectors' last units through masked loads and stores. Compiled with
// -mavx2 -mfma.
#include <immintrin.h>

#include "math_avx2.h"
#include "rnn_cell_body.h"

namespace optim::kernels {
namespace {

struct Avx2 {
  using F = __m256;
  static constexpr int64_t kWidth = 8;
  struct Lanes {
    explicit Lanes(int64_t count)
        : full(count >= kWidth), mask(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count < kWidth ? count : kWidth)),
                                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))) {}
    __m256 load(const float* p) const { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask); }
    void store(float* p, __m256 v) const {
      if (full) {
        _mm256_storeu_ps(p, v);
      } else {
        _mm256_maskstore_ps(p, mask, v);
      }
    }
    bool full;
    __m256i mask;
  };
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 set1(float v) { return _mm256_set1_ps(v); }
  static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  // max/min return their second operand when either is NaN: NaN in v comes through both.
  static __m256 clip(__m256 v, __m256 lo, __m256 hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }
  static __m256 sigmoid(__m256 v) { return sigmoid_ps(v); }
  static __m256 tanh(__m256 v) { return tanh_ps(v); }
};

}  // namespace

void rnn_cell_f32_avx2(RnnCell cell, const RnnCellArgs& a) { rnn_cell_kernel<Avx2>(cell, a); }

}  // namespace optim::kernels
