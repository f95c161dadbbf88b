// AVX2 weight-only GEMM with int8 activations (kernel_table.h, MatMulNBitsQ8Fn): matmul_nbits_q8_ymm.h with
// vpmaddubsw (u8 code x s8 activation): the low and high nibbles' pair sums added in int16 (at most 4 x 15 x 127),
// then one vpmaddwd by ones into int32. Compiled with -mavx2 -mfma.
#include "matmul_nbits_q8_ymm.h"

namespace optim::kernels {
namespace {

struct Pairs {
  static __m256i dot2(__m256i sum, __m256i lo, __m256i even, __m256i hi, __m256i odd) {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, even), _mm256_maddubs_epi16(hi, odd));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};

}  // namespace

void matmul_nbits_q8_avx2(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& a) {
  q8_ymm_rows<Pairs>(m0, m1, n0, n1, a);
}

}  // namespace optim::kernels
