// AVX-512 Winograd F(2x2, 3x3) tile transforms: winograd_f23.h on 16 channels per vector, the last channels
// through its scalar body. Compiled with -mavx512f; only called when the CPU reports AVX-512 (kernel_table.cc).
#include <immintrin.h>

#include "math_avx512.h"
#include "winograd_f23.h"

namespace optim::kernels {
namespace {

struct V512 : F32x16 {
  using In = float;
  using Out = float;
  using Sum = float;
  static Reg finish(Reg v, const float* bias, const float* residual, const ConvF32Epilogue& ep) {
    return conv_epilogue512(v, static_cast<__mmask16>(0xFFFF), bias, residual, ep);
  }
};

}  // namespace

void winograd_input_f32_avx512(const float* const* px, int64_t tiles, int64_t channels, float* v, int64_t ld_pos,
                               int64_t ld_tile) {
  winograd_input<V512>(px, tiles, channels, v, ld_pos, ld_tile);
}

void winograd_output_f32_avx512(const float* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                                const int64_t* pixel, float* c, int64_t ldc, int64_t j0, const ConvF32Epilogue& ep) {
  winograd_output<V512>(m, ld_pos, ld_tile, tiles, cols, pixel, c, ldc, j0, ep);
}

}  // namespace optim::kernels
