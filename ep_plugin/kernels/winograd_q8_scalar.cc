// Exact integer Winograd F(2x2, 3x3) tile transforms, one channel at a time: the reference (winograd_f23.h's body
// on winograd_q8.h's scalar types) that the vector kernels equal bit for bit.
#include "winograd_q8.h"

namespace optim::kernels {
namespace {

template <bool Signed>
struct ScalarIn : WinogradQ8Scalar<Signed> {
  static WinogradQ8Scalar<Signed> make(int32_t zero) { return {zero}; }
};

}  // namespace

void winograd_input_q8_scalar(const uint8_t* const* px, int64_t tiles, int64_t channels, int64_t kt, bool x_signed,
                              int32_t x_zero, int16_t* v, int64_t ld_pos, int64_t ld_tile) {
  winograd_input_q8<ScalarIn>(px, tiles, channels, kt, x_signed, x_zero, v, ld_pos, ld_tile);
}

void winograd_output_q8_scalar(const int32_t* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                               const int64_t* pixel, uint8_t* c, int64_t ldc, int64_t j0, const QgemmEpilogue& ep) {
  const WinogradQ8ScalarOut out{c, ldc, ep};
  winograd_output_tiles(out, out, m, ld_pos, ld_tile, tiles, cols, pixel, j0);
}

}  // namespace optim::kernels
