// AVX-VNNI weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn): matmul_nbits_q8_ymm.h with
// the 256-bit VEX vpdpbusd (four u8 x s8 products into each int32 lane). Compiled with -mavx2 -mfma -mavxvnni.
#include "matmul_nbits_q8_ymm.h"

namespace optim::kernels {
namespace {

struct VexDot {
  static __m256i dot2(__m256i sum, __m256i lo, __m256i even, __m256i hi, __m256i odd) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(sum, lo, even), hi, odd);
  }
};

}  // namespace

void matmul_nbits_q8_avxvnni(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  q8_ymm_rows<VexDot>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
