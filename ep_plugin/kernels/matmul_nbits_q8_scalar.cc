// Scalar weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn) and the packing of B it and the
// vector kernels read: the reference they follow (their integer sums equal its; their float sums may run in another
// order).
#include <cstring>

#include "kernel_table.h"

namespace optim::kernels {

void matmul_nbits_q8_pack(const uint8_t* codes, const float* scales, const float* zeros, int64_t n, int64_t blocks,
                          int64_t block, uint8_t* packed, uint8_t* params) {
  const int64_t groups = (n + kQ8Columns - 1) / kQ8Columns, chunks = block / 32, blob = block / 2;
  std::memset(packed, 0, static_cast<size_t>(groups * blocks * block * 2));
  std::memset(params, 0, static_cast<size_t>(groups * blocks * kQ8ParamBytes));
  for (int64_t col = 0; col < n; ++col) {
    const int64_t g = col / kQ8Columns, j = col % kQ8Columns;
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t c = 0; c < chunks; ++c)
        std::memcpy(packed + ((g * blocks + b) * chunks + c) * 64 + j * 16, codes + (col * blocks + b) * blob + c * 16, 16);
      uint8_t* p = params + (g * blocks + b) * kQ8ParamBytes;
      std::memcpy(p + j * sizeof(float), scales + col * blocks + b, sizeof(float));
      p[4 * sizeof(float) + j] = static_cast<uint8_t>(zeros[col * blocks + b]);
    }
  }
}

void matmul_nbits_q8_scalar(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  const int64_t chunks = a.block / 32;
  for (int64_t m = m0; m < m1; ++m) {
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t g = n / kQ8Columns, j = n % kQ8Columns;
      float acc = 0.f, zero_part = 0.f;
      for (int64_t b = 0; b < a.blocks; ++b) {
        int32_t sum = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          const uint8_t* q = a.b + ((g * a.blocks + b) * chunks + c) * 64 + j * 16;
          const int8_t* x = a.aq + m * a.ldq + b * a.block + c * 32;
          for (int64_t i = 0; i < 16; ++i) sum += (q[i] & 15) * x[i] + (q[i] >> 4) * x[16 + i];
        }
        const uint8_t* p = a.params + (g * a.blocks + b) * kQ8ParamBytes;
        float scale;
        std::memcpy(&scale, p + j * sizeof(float), sizeof scale);
        acc += scale * a.a_scale[m * a.blocks + b] * static_cast<float>(sum);
        zero_part += scale * static_cast<float>(p[4 * sizeof(float) + j]) * a.a_zero[m * a.blocks + b];
      }
      a.c[m * a.ldc + n] = acc - zero_part + (a.bias ? a.bias[n] : 0.f);
    }
  }
}

}  // namespace optim::kernels
