// One thread of OptimEP's AVX2 int16-pair convolution GEMM (conv_gemm_s16_avx2_6x16) on a 1x1 convolution's rows,
// as a unit or a MobileNet block's expansion runs it (ops/qconv_nhwc_forms.cc, pointwise_gemm): A the rows' int16
// q - zero, per-column scales and biases, a folded Relu; C bytes, or the float q - zero a block's depthwise reads.
// Built and run by kernel_ab.py (with the kernel's source, -O3 -mavx2 -mfma as the library builds it).
//
//   kernel_conv_gemm_s16 M K N OUT RUNS   (OUT: uint8 | centered_float)
//
// Prints "us <best microseconds of RUNS> gmacs <multiply-adds per second / 1e9 at the best run>".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_driver.h"
#include "kernel_table.h"

OPTIM_DRIVER_KERNEL(ConvGemmQ8Fn, conv_gemm_s16_avx2_6x16)

int main(int argc, char** argv) {
  using namespace optim::kernels;
  if (!optim::bench::driver_args(argc, argv, 5, "M K N uint8|centered_float RUNS")) return 2;
  const int64_t m = std::atol(argv[1]), k = std::atol(argv[2]), n = std::atol(argv[3]);
  const bool centered_float = std::strcmp(argv[4], "centered_float") == 0;
  const int runs = std::atoi(argv[5]);
  if (m < 1 || k < 1 || n < 1 || runs < 1) {
    std::fprintf(stderr, "M, K, N and RUNS are at least 1\n");
    return 2;
  }
  const int64_t kt = (k + 1) / 2 * 2, panels = (n + 15) / 16;  // K padded to pairs, N to 16-column panels
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> centered(-3, 252), weight(-127, 127);
  std::vector<int16_t> a(static_cast<size_t>(m * kt)), w(static_cast<size_t>(panels * kt * 16));
  for (int16_t& v : a) v = static_cast<int16_t>(centered(rng));
  for (int16_t& v : w) v = static_cast<int16_t>(weight(rng));
  std::vector<float> scale(static_cast<size_t>(panels * 16), 1e-4f), bias(static_cast<size_t>(panels * 16), 0.5f);
  std::vector<float> c(static_cast<size_t>(m * n));  // room for either output
  QgemmEpilogue ep;
  ep.scale_col = scale.data();
  ep.bias_col = bias.data();
  ep.out = QuantOut::kUint8;
  ep.out_zero = ep.qmin = 3;  // a folded Relu
  ep.centered_float = centered_float;
  static const int64_t kOneTap = 0;
  ConvGemmQ8Args g;
  g.a = {a.data(), m, m, m * kt, 1, 1, m, kt, 1, kt, &kOneTap};  // a plain GEMM, as pointwise_gemm sets it
  g.w = w.data();
  g.n = n;
  g.c = c.data();
  g.ldc = n;
  g.ep = &ep;
  const double macs = static_cast<double>(m * k * n);
  optim::bench::print_best_of(runs, macs, [&](int) { conv_gemm_s16_avx2_6x16(0, m, 0, panels, g); });
  return 0;
}
