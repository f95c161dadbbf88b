// AVX-512 VNNI weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn): matmul_nbits_q8_columns.h
// with the EVEX 256-bit vpdpbusd (AVX512-VL). Compiled with -mavx512f (and the VNNI set).
#include "matmul_nbits_q8_columns.h"

namespace optim::kernels {
namespace {

struct EvexDot {
  static __m256i dot32(__m256i sum, __m256i codes, __m256i x) { return _mm256_dpbusd_epi32(sum, codes, x); }
};

}  // namespace

void matmul_nbits_q8_avx512vnni(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  q8_rows<EvexDot>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
