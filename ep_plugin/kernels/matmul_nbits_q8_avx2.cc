// AVX2 weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn): matmul_nbits_q8_columns.h with
// vpmaddubsw (u8 code x s8 activation, pairs summed in int16: at most 2 x 15 x 127) then vpmaddwd by ones into
// int32. Compiled with -mavx2 -mfma.
#include "matmul_nbits_q8_columns.h"

namespace optim::kernels {
namespace {

struct Pairs {
  static __m256i dot32(__m256i sum, __m256i codes, __m256i x) {
    return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, x), _mm256_set1_epi16(1)));
  }
};

}  // namespace

void matmul_nbits_q8_avx2(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  q8_rows<Pairs>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
