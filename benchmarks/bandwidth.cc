// This machine's memory read bandwidth, measured: every thread streams through its own share of a buffer far larger
// than the caches (SSE2 loads summed so the reads cannot be dropped), and the program prints the bytes per second of
// all threads together, the best of several passes. benchmarks/bandwidth.py compiles it with the system g++ and runs
// it; a decode step that reads every weight once is bounded by (weight bytes) / (this rate).
//
//   bandwidth THREADS MIB PASSES     -> prints "read <bytes per second>"

#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// Sums the 16-byte words of [p, p + bytes) so the loads have a use; four accumulators keep the adds off the
// critical path.
int64_t read_all(const char* p, size_t bytes) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    a = _mm_add_epi64(a, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
    b = _mm_add_epi64(b, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
    c = _mm_add_epi64(c, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
    d = _mm_add_epi64(d, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
  }
  const __m128i s = _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d));
  return _mm_cvtsi128_si64(s) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s THREADS MIB PASSES\n", argv[0]);
    return 2;
  }
  const int threads = std::max(1, std::atoi(argv[1]));
  const size_t bytes = static_cast<size_t>(std::max(64, std::atoi(argv[2]))) << 20;
  const int passes = std::max(1, std::atoi(argv[3]));
  char* buffer = static_cast<char*>(std::aligned_alloc(64, bytes));
  if (!buffer) return 1;
  const size_t share = bytes / threads / 64 * 64;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)  // each thread touches its own share first (its pages, its NUMA node)
    pool.emplace_back([=] { for (size_t i = 0; i < share; i += 4096) buffer[t * share + i] = static_cast<char>(i); });
  for (auto& th : pool) th.join();
  double best = 0;
  volatile int64_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    pool.clear();
    std::vector<int64_t> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sums[t] = read_all(buffer + t * share, share); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(share) * threads / s);
    for (int64_t v : sums) sink = sink + v;
  }
  std::printf("read %.0f\n", best);
  std::free(buffer);
  return 0;
}
