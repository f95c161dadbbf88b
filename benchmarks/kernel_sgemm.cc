// One thread of OptimEP's AVX2 float GEMM (sgemm_f32_avx2_6x16) on a MatMul with constant weights, as a
// transformer's projections run it (ops/matmul.cc, ops/sgemm_driver.cc: B packed once when the session starts, a
// bias per column): the kernel alone, without a session, so a kernel change shows on a noisy host. Built and run
// by kernel_ab.py (with the kernel's sources, -O3 -mavx2 -mfma as the library builds them).
//
//   kernel_sgemm M K N COPIES RUNS
//
// COPIES packed copies of B are used in turn, one a call: with enough of them (more than L3 holds) B streams from
// memory on every call, as a model's weights do when they exceed the caches; 1 keeps B in cache.
// Prints "us <best microseconds of RUNS> gmacs <multiply-adds per second / 1e9 at the best run>".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernel_driver.h"
#include "kernel_table.h"

OPTIM_DRIVER_KERNEL(SgemmFn, sgemm_f32_avx2_6x16)

int main(int argc, char** argv) {
  using namespace optim::kernels;
  if (!optim::bench::driver_args(argc, argv, 5, "M K N COPIES RUNS")) return 2;
  const int64_t m = std::atol(argv[1]), k = std::atol(argv[2]), n = std::atol(argv[3]), copies = std::atol(argv[4]);
  const int runs = std::atoi(argv[5]);
  if (m < 1 || k < 1 || n < 1 || copies < 1 || runs < 1) {
    std::fprintf(stderr, "M, K, N, COPIES and RUNS are at least 1\n");
    return 2;
  }
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
  std::vector<float> bias(static_cast<size_t>(n));
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  const size_t per_copy = sgemm_packed_b_floats(k, n);
  std::vector<float> packed(per_copy * static_cast<size_t>(copies));
  for (int64_t i = 0; i < copies; ++i) sgemm_pack_b(b.data(), n, false, k, n, packed.data() + i * per_copy);
  SgemmEpilogue ep;
  ep.bias_col = bias.data();
  const int64_t panels = (n + 15) / 16;
  optim::bench::print_best_of(runs, static_cast<double>(m * k * n), [&](int r) {
    const float* b_packed = packed.data() + static_cast<size_t>(r % copies) * per_copy;
    sgemm_f32_avx2_6x16(0, m, 0, panels, n, k, a.data(), k, b_packed, c.data(), n, ep);
  });
  return 0;
}
