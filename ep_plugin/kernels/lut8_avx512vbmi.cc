// AVX-512 VBMI 256-entry byte table lookup (kernel_table.h, Lut8Fn): the table in four zmm registers; per
// 64 bytes two vpermi2b look the low 7 bits up in each half of the table and the top bit picks the half.
// Compiled for AVX-512 (F/BW) with VBMI enabled on these functions only; chosen only where the CPU reports
// VBMI (kernel_list.inc, OPTIM_KERNEL_IF).
#include <immintrin.h>

#include "kernel_table.h"

namespace optim::kernels {

__attribute__((target("avx512vbmi"))) void lut8_avx512vbmi(const uint8_t* x, uint8_t flip, const uint8_t* table, uint8_t* y,
                                                           int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i < n; i += 64) {
    const __mmask64 k = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(k, x + i), f);
    const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);  // entries 0..127 by idx's low 7 bits
    const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);  // entries 128..255
    _mm512_mask_storeu_epi8(y + i, k, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
  }
}

}  // namespace optim::kernels
