// This machine's arithmetic peak, measured: every thread (one per core) runs a loop of independent
// multiply-accumulate instructions with no memory traffic, and the program prints the operations
// per second of all threads together. benchmarks/peak.py compiles it with the system g++ and runs it.
//
//   peak_fma KERNEL THREADS SECONDS     -> prints "<KERNEL> <ops per second>"
//
// Kernels (each counts a multiply-add as 2 operations):
//   f32_avx512  vfmadd231ps zmm: 16 lanes          f32_avx2      vfmadd231ps ymm: 8 lanes
//   u8s8_avx512vnni  vpdpbusd zmm: 64 u8 x s8 MACs  u8s8_avxvnni  vpdpbusd ymm (VEX): 32 MACs
//   u8s8_avx2   vpmaddubsw + vpmaddwd (ones) + vpaddd ymm: 32 u8 x s8 MACs (OptimEP's AVX2 kernels for weights
//               whose pairs fit int16, e.g. 7-bit ones)
//   s16_avx2    vpmaddwd + vpaddd ymm: 16 int16-pair MACs (the exact int8 path for any weights without VNNI)
//
// As in the kernels, the products do not depend on the accumulators (only the adds do), so a kernel is limited by
// the multiplier's throughput, not by its latency: ACC independent accumulators per thread, and the operands pass
// through an empty asm statement every iteration so that the compiler cannot hoist the products out of the loop.

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int ACC = 12;
constexpr long INNER = 4096;  // iterations between clock reads

using Clock = std::chrono::steady_clock;
constexpr int SINK_BYTES = ACC * 64;  // room for ACC zmm registers

// A kernel: ACC accumulators of VEC set to INIT(i); each iteration hides the operands X and Y from the
// optimizer and updates every accumulator by STEP(acc, X, Y). It returns the operations done (OPS per STEP) and
// stores the accumulators in `sink`, so the compiler cannot drop the work. A macro, not a template: GCC only
// inlines intrinsics into functions compiled for their ISA, and a template or lambda does not inherit the
// caller's target attribute.
#define PEAK_KERNEL(NAME, TARGET, VEC, INIT, X, Y, STEP, OPS)                                  \
  __attribute__((target(TARGET))) double NAME(void* sink) {                                   \
    VEC acc[ACC];                                                                                \
    for (int i = 0; i < ACC; ++i) acc[i] = INIT(i);                                              \
    VEC x = X, y = Y;                                                                            \
    for (long n = 0; n < INNER; ++n) {                                                           \
      asm volatile("" : "+x"(x), "+x"(y));                                                       \
      _Pragma("GCC unroll 16") for (int i = 0; i < ACC; ++i) acc[i] = STEP(acc[i], x, y);       \
    }                                                                                            \
    std::memcpy(sink, acc, sizeof(acc));                                                         \
    return double(OPS) * ACC * INNER;                                                            \
  }

// fp32: acc + x * y with x * y tiny (no overflow, no denormals).
#define F32_512_INIT(i) _mm512_set1_ps(0.001f * (i))
#define F32_256_INIT(i) _mm256_set1_ps(0.001f * (i))
#define F32_512_STEP(a, x, y) _mm512_fmadd_ps(x, y, a)
#define F32_256_STEP(a, x, y) _mm256_fmadd_ps(x, y, a)
// int8: integer wrap-around of the sums is harmless.
#define I32_512_INIT(i) _mm512_set1_epi32(i)
#define I32_256_INIT(i) _mm256_set1_epi32(i)
#define U8S8_512_STEP(a, x, y) _mm512_dpbusd_epi32(a, x, y)
#define U8S8_256_STEP(a, x, y) _mm256_dpbusd_avx_epi32(a, x, y)
#define U8S8_PAIRS_STEP(a, x, y) _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)))
#define S16_256_STEP(a, x, y) _mm256_add_epi32(a, _mm256_madd_epi16(x, y))

PEAK_KERNEL(f32_avx512, "avx512f", __m512, F32_512_INIT, _mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-6f), F32_512_STEP, 2 * 16)
PEAK_KERNEL(f32_avx2, "avx2,fma", __m256, F32_256_INIT, _mm256_set1_ps(1e-3f), _mm256_set1_ps(1e-6f), F32_256_STEP, 2 * 8)
PEAK_KERNEL(u8s8_avx512vnni, "avx512f,avx512vnni", __m512i, I32_512_INIT, _mm512_set1_epi8(3), _mm512_set1_epi8(-2),
            U8S8_512_STEP, 2 * 64)
PEAK_KERNEL(u8s8_avxvnni, "avx2,avxvnni", __m256i, I32_256_INIT, _mm256_set1_epi8(3), _mm256_set1_epi8(-2), U8S8_256_STEP,
            2 * 32)
PEAK_KERNEL(u8s8_avx2, "avx2", __m256i, I32_256_INIT, _mm256_set1_epi8(3), _mm256_set1_epi8(-2), U8S8_PAIRS_STEP, 2 * 32)
PEAK_KERNEL(s16_avx2, "avx2", __m256i, I32_256_INIT, _mm256_set1_epi16(3), _mm256_set1_epi16(-2), S16_256_STEP, 2 * 16)

struct Kernel {
  const char* name;
  double (*run)(void*);
};

const Kernel KERNELS[] = {{"f32_avx512", f32_avx512},
                          {"f32_avx2", f32_avx2},
                          {"u8s8_avx512vnni", u8s8_avx512vnni},
                          {"u8s8_avxvnni", u8s8_avxvnni},
                          {"u8s8_avx2", u8s8_avx2},
                          {"s16_avx2", s16_avx2}};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s KERNEL THREADS SECONDS\n", argv[0]);
    return 2;
  }
  const Kernel* kernel = nullptr;
  for (const Kernel& k : KERNELS)
    if (std::strcmp(k.name, argv[1]) == 0) kernel = &k;
  const int threads = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  if (kernel == nullptr || threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "unknown kernel %s, or THREADS < 1, or SECONDS <= 0\n", argv[1]);
    return 2;
  }
  // All threads start together and stop at the same deadline, so the sum is a rate of the whole chip.
  std::atomic<bool> go{false};
  std::vector<double> ops(threads, 0.0);
  std::vector<unsigned char> sinks(static_cast<size_t>(threads) * SINK_BYTES);  // one block per thread
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      while (!go.load()) {
      }
      const auto end = Clock::now() + std::chrono::duration<double>(seconds);
      double done = 0;
      while (Clock::now() < end) done += kernel->run(&sinks[static_cast<size_t>(t) * SINK_BYTES]);
      ops[t] = done;
    });
  const auto start = Clock::now();
  go.store(true);
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  double total = 0;
  for (double o : ops) total += o;
  std::printf("%s %.6e\n", kernel->name, total / elapsed);
  return 0;
}
