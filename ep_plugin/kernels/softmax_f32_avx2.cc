// AVX2 Softmax of one contiguous row (kernel_table.h, SoftmaxFn): softmax_row.h on 8 floats, the tail through
// a stack copy. Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <algorithm>

#include "math_avx2.h"
#include "softmax_row.h"

namespace optim::kernels {
namespace {

struct V256 : F32x8 {
  static Reg load_part(const float* p, int64_t count, float fill) {
    alignas(32) float buf[8];
    std::fill(buf, buf + 8, fill);
    std::copy(p, p + count, buf);
    return _mm256_load_ps(buf);
  }
  static void store_part(float* p, int64_t count, Reg v) {
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    std::copy(buf, buf + count, p);
  }
  static Reg exp(Reg v) { return exp_ps(v); }
  static float reduce_max(Reg v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
  static float reduce_add(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};

}  // namespace

void softmax_f32_avx2(const float* x, float* y, int64_t n) { softmax_row<V256>(x, y, n); }

}  // namespace optim::kernels
