// AVX2 u8 x s8 integer convolution GEMM and GEMM (conv_gemm_u8s8_ymm.h) with the dot step of vpmaddubsw (two
// uint8 x int8 products summed into an int16, saturating) widened by vpmaddwd with ones: twice the int16-pair
// kernels' products per instruction, and exact only for weights that pass u8s8_pairs_exact (the table marks
// these rows int16_pairs; ops keep the int16-pair kernels for other weights). 5 pixels by 16 columns: ten
// accumulators leave room for the weights, the broadcast, the ones and two products in flight (4 and 6 rows
// measured a few % slower). Compiled with -mavx2 -mfma.
#include "conv_gemm_u8s8_ymm.h"

namespace optim::kernels {
namespace {

struct PairsInInt16 {
  const __m256i ones = _mm256_set1_epi16(1);
  OPTIM_INLINED __m256i operator()(__m256i acc, __m256i a, __m256i b) const {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  }
};

constexpr int kRows = 5;

}  // namespace

void conv_gemm_u8s8_avx2_5x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  conv_gemm_u8s8_ymm<kRows, PairsInInt16>(m0, m1, p0, p1, g);
}

void qgemm_u8s8_avx2_5x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                          int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                          const QgemmEpilogue& ep) {
  qgemm_u8s8_ymm<kRows, PairsInInt16>(m0, m1, p0, p1, n, kq, a, lda, b_packed, comp_col, c, ldc, ep);
}

}  // namespace optim::kernels
