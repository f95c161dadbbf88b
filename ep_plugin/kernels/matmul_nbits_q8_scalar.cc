// Scalar weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn): the reference the vector
// kernels follow (their integer sums equal its; their float sums may run in another order).
#include "kernel_table.h"

namespace optim::kernels {

void matmul_nbits_q8_scalar(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  const int64_t blob = a.block / 2;
  for (int64_t m = m0; m < m1; ++m) {
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0.f;
      for (int64_t b = 0; b < a.blocks; ++b) {
        const uint8_t* q = a.b + (n * a.blocks + b) * blob;
        const int8_t* x = a.aq + m * a.ldq + b * a.block;
        int32_t sum = 0;
        for (int64_t c = 0; c < a.block; c += 32, q += 16, x += 32)
          for (int64_t i = 0; i < 16; ++i) sum += (q[i] & 15) * x[i] + (q[i] >> 4) * x[16 + i];
        const int64_t sb = n * a.blocks + b, ab = m * a.blocks + b;
        acc += a.scales[sb] * a.a_scale[ab] * (static_cast<float>(sum) - a.zeros[sb] * static_cast<float>(a.a_sum[ab]));
      }
      a.c[m * a.ldc + n] = acc + (a.bias ? a.bias[n] : 0.f);
    }
  }
}

}  // namespace optim::kernels
