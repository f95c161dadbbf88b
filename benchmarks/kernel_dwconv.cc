// One thread of OptimEP's AVX2 int8 depthwise kernel (dwconv_q8_avx2) on a band of output rows, as a MobileNet
// block runs it (ops/qconv_block.cc: float32 x - zero in, int16 q - zero out for an int16-pair projection, or
// bytes): the kernel alone, without a model's other steps or a session, so a kernel change shows on a noisy host.
// Built and run by kernel_ab.py (with the kernels' sources, -O3 -mavx2 -mfma as the library builds them).
//
//   kernel_dwconv H C STRIDE ROWS OUT RUNS   (OUT: int16 | uint8 | float, the last the epilogue's cheapest form)
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

OPTIM_DRIVER_KERNEL(DwconvQ8Fn, dwconv_q8_avx2)

int main(int argc, char** argv) {
  using namespace optim::kernels;
  if (!optim::bench::driver_args(argc, argv, 6, "H C STRIDE ROWS int16|uint8|float RUNS")) return 2;
  const int64_t h = std::atol(argv[1]), c = std::atol(argv[2]), s = std::atol(argv[3]), rows = std::atol(argv[4]);
  const bool centered16 = std::strcmp(argv[5], "int16") == 0, to_float = std::strcmp(argv[5], "float") == 0;
  const int runs = std::atoi(argv[6]);
  if (h < 3 || c < 1 || (s != 1 && s != 2) || rows < 1 || runs < 1) {
    std::fprintf(stderr, "H >= 3, C >= 1, STRIDE 1 or 2, ROWS >= 1, RUNS >= 1\n");
    return 2;
  }
  // A band inside the image (its input rows all exist, as for every band but the first and last), "same" padding
  // along the row as MobileNets use.
  DwconvGeometry g;
  g.kh = g.kw = 3;
  g.sh = g.sw = s;
  g.pw = 1;
  g.channels = g.cs = c;
  g.w = h;
  g.ow = (h + 2 - 3) / s + 1;
  g.oh = rows;
  g.h = (rows - 1) * s + 3;
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127);
  std::vector<float> x(static_cast<size_t>(g.h * g.w * c)), w(static_cast<size_t>(9 * c));
  std::vector<float> scale(c, 1e-3f), bias(c, 0.5f);
  for (float& v : x) v = static_cast<float>(byte(rng) - 3);  // q - zero, zero point 3
  for (float& v : w) v = static_cast<float>(weight(rng));
  std::vector<float> out(static_cast<size_t>(rows * g.ow * c));  // room for any of the outputs
  QgemmEpilogue ep;
  ep.scale_col = scale.data();
  ep.bias_col = bias.data();
  ep.out = to_float ? QuantOut::kFloat32 : QuantOut::kUint8;
  ep.out_zero = ep.qmin = 3;  // a folded Relu
  DwconvQ8Args a;
  a.g = g;
  a.x = x.data();
  a.w = w.data();
  a.c = out.data();
  a.ldc = c;
  a.ep = &ep;
  a.centered16 = centered16;
  const double macs = static_cast<double>(rows * g.ow * c * 9);
  optim::bench::print_best_of(runs, macs, [&](int) { dwconv_q8_avx2(0, rows * g.ow, a); });
  return 0;
}
