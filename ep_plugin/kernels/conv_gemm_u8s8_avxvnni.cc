// AVX-VNNI u8 x s8 integer convolution GEMM and GEMM (conv_gemm_u8s8_ymm.h) with the dot step of the VEX
// vpdpbusd: four uint8 x int8 products summed into int32 with no intermediate saturation, exact for any int8
// weights. 6 pixels by 16 columns: twelve accumulators, the two weight vectors and the broadcast fill the 16
// registers. Compiled with -mavx2 -mfma -mavxvnni; only called where the CPU has AVX-VNNI.
#include "conv_gemm_u8s8_ymm.h"

namespace optim::kernels {
namespace {

struct Quads {
  OPTIM_INLINED __m256i operator()(__m256i acc, __m256i a, __m256i b) const { return _mm256_dpbusd_avx_epi32(acc, a, b); }
};

constexpr int kRows = 6;

}  // namespace

void conv_gemm_u8s8_avxvnni_6x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& g) {
  conv_gemm_u8s8_ymm<kRows, Quads>(m0, m1, p0, p1, g);
}

void qgemm_u8s8_avxvnni_6x16(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                             int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                             const QgemmEpilogue& ep) {
  qgemm_u8s8_ymm<kRows, Quads>(m0, m1, p0, p1, n, kq, a, lda, b_packed, comp_col, c, ldc, ep);
}

}  // namespace optim::kernels
