// Winograd F(2x2, 3x3) tile transforms, one channel at a time: the reference (winograd_f23.h's body on
// one float) that the vector kernels equal bit for bit.
#include "winograd_f23.h"

namespace optim::kernels {

void winograd_input_f32_scalar(const float* const* px, int64_t tiles, int64_t channels, float* v, int64_t ld_pos,
                               int64_t ld_tile) {
  winograd_input<WinogradScalar>(px, tiles, channels, v, ld_pos, ld_tile);
}

void winograd_output_f32_scalar(const float* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                                const int64_t* pixel, float* c, int64_t ldc, int64_t j0, const ConvF32Epilogue& ep) {
  winograd_output<WinogradScalar>(m, ld_pos, ld_tile, tiles, cols, pixel, c, ldc, j0, ep);
}

}  // namespace optim::kernels
