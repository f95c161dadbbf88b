// The exact integer Winograd F(2x2, 3x3) transforms' element types for winograd_f23.h (kernel_table.h,
// WinogradInputQ8Fn / WinogradOutputQ8Fn), one value at a time: the scalar kernels' and the vector kernels' last
// channels. Inputs are bytes minus the zero point (|d| <= 255, so |V| <= 1020 fits int16); outputs are int32
// sums that the ops keep from overflowing (QWinogradForm), divided by 4 (G' = 2G made U' four times U) before
// the integer epilogue.
#pragma once

#include "qgemm_epilogue.h"
#include "winograd_f23.h"

namespace optim::kernels {
namespace {  // internal linkage, as in winograd_f23.h

template <bool Signed>
struct WinogradQ8Scalar {
  using In = uint8_t;
  using Out = int16_t;
  using Reg = int32_t;
  static constexpr int64_t kWidth = 1;
  int32_t zero;
  Reg load(const uint8_t* p) const { return (Signed ? int32_t{static_cast<int8_t>(*p)} : int32_t{*p}) - zero; }
  static void store(int16_t* p, Reg v) { *p = static_cast<int16_t>(v); }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg sub(Reg a, Reg b) { return a - b; }
};

struct WinogradQ8ScalarOut {
  using Sum = int32_t;
  using Reg = int32_t;
  static constexpr int64_t kWidth = 1;
  uint8_t* c;
  int64_t ldc;
  const QgemmEpilogue& ep;
  static Reg load(const int32_t* p) { return *p; }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg sub(Reg a, Reg b) { return a - b; }
  // y is 4x the exact sum: the quotient is exact.
  void emit(Reg y, int64_t px, int64_t j) const { qgemm_store(y / 4, px, j, ep, c, px * ldc + j); }
};

// The input transform for uint8 or int8 pixels, with the vector type I<Signed> and the scalar one for the tail.
template <template <bool> class I>
void winograd_input_q8(const uint8_t* const* px, int64_t tiles, int64_t channels, int64_t kt, bool x_signed,
                       int32_t x_zero, int16_t* v, int64_t ld_pos, int64_t ld_tile) {
  if (x_signed)
    winograd_input_tiles(I<true>::make(x_zero), WinogradQ8Scalar<true>{x_zero}, px, tiles, channels, kt, v, ld_pos, ld_tile);
  else
    winograd_input_tiles(I<false>::make(x_zero), WinogradQ8Scalar<false>{x_zero}, px, tiles, channels, kt, v, ld_pos, ld_tile);
}

}  // namespace
}  // namespace optim::kernels
