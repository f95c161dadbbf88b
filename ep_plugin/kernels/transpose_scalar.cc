// Scalar transposes of 32-bit values and bytes (kernel_table.h), in 8 x 8 blocks so that both sides
// stay within a few cache lines at a time.
#include <algorithm>

#include "kernel_table.h"

namespace optim::kernels {

namespace {

template <typename T>
void transpose_blocks(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8)
    for (int64_t c0 = 0; c0 < cols; c0 += 8) {
      const int64_t r1 = std::min(rows, r0 + 8), c1 = std::min(cols, c0 + 8);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
    }
}

}  // namespace

void transpose32_scalar(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  transpose_blocks(src, ld_src, dst, ld_dst, rows, cols);
}

void transpose8_scalar(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  transpose_blocks(src, ld_src, dst, ld_dst, rows, cols);
}

}  // namespace optim::kernels
