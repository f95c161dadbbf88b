// AVX-512 Softmax of one contiguous row (kernel_table.h, SoftmaxFn): softmax_row.h on 16 floats, the tail
// through masked loads and stores. Compiled with -mavx512f.
#include <immintrin.h>

#include "math_avx512.h"
#include "softmax_row.h"

namespace optim::kernels {
namespace {

struct V512 : F32x16 {
  static __mmask16 mask(int64_t count) { return static_cast<__mmask16>((1u << count) - 1); }
  static Reg load_part(const float* p, int64_t count, float fill) { return _mm512_mask_loadu_ps(set1(fill), mask(count), p); }
  static void store_part(float* p, int64_t count, Reg v) { _mm512_mask_storeu_ps(p, mask(count), v); }
  static Reg exp(Reg v) { return exp512(v); }
  static float reduce_max(Reg v) { return _mm512_reduce_max_ps(v); }
  static float reduce_add(Reg v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void softmax_f32_avx512(const float* x, float* y, int64_t n) { softmax_row<V512>(x, y, n); }

}  // namespace optim::kernels
