// Scalar weight-only quantized GEMM (kernel_table.h, MatMulNBitsFn): the reference the vector kernels are tested
// against.
#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

void matmul_nbits_f32_scalar(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& a) {
  const int64_t blob = a.block * a.bits / 8;
  for (int64_t m = m0; m < m1; ++m) {
    const float* row = a.a + m * a.lda;
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0.f;
      for (int64_t b = 0; b < a.blocks; ++b) {
        const uint8_t* q = a.b + (n * a.blocks + b) * blob;
        const int64_t k0 = b * a.block, k1 = std::min(a.k, k0 + a.block);
        float dot = 0.f;
        for (int64_t k = k0; k < k1; ++k) {
          const int64_t i = k - k0;
          const int code = a.bits == 4 ? (q[i / 2] >> (i % 2 * 4)) & 15 : q[i];
          dot += row[k] * static_cast<float>(code);
        }
        const int64_t sb = n * a.blocks + b;
        acc += a.scales[sb] * (dot - a.zeros[sb] * a.asum[m * a.blocks + b]);
      }
      a.c[m * a.ldc + n] = acc + (a.bias ? a.bias[n] : 0.f);
    }
  }
}

}  // namespace optim::kernels
