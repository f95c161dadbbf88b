// What the kernel_ab.py drivers share: declaring their kernel, checking their argument count, and timing one kernel
// call as the best of RUNS, printed as "us <best microseconds> gmacs <multiply-adds per second / 1e9 at the best
// run>".
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <type_traits>

// Declares kernel `name` by its family's function type (kernel_table.h), so a change to the signature fails to
// compile here.
#define OPTIM_DRIVER_KERNEL(Fn, name) \
  namespace optim::kernels {          \
  std::remove_pointer_t<Fn> name;     \
  }

namespace optim::bench {

// Whether argv holds `count` arguments after the program's name; else the usage line is printed.
inline bool driver_args(int argc, char** argv, int count, const char* usage) {
  if (argc == count + 1) return true;
  std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
  return false;
}

// Calls call(run index) `runs` times and prints the best call's time and rate for `macs` multiply-adds a call.
template <typename Call>
void print_best_of(int runs, double macs, const Call& call) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call(r);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("us %.3f gmacs %.3f\n", best * 1e6, macs / best / 1e9);
}

}  // namespace optim::bench
