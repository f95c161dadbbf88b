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
// The two pair kernels are written in assembly (PAIR_KERNEL): their products do not read the accumulator, so in C++
// the compiler computes one product for all ACC accumulators of an iteration (measured before: a "peak" of adds,
// 1.3-1.5x too high for u8s8_avx2), and with a product per accumulator it spills; here 8 accumulators take 8
// different operand pairs each iteration, every instruction as OptimEP's kernels issue it.

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

PEAK_KERNEL(f32_avx512, "avx512f", __m512, F32_512_INIT, _mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-6f), F32_512_STEP, 2 * 16)
PEAK_KERNEL(f32_avx2, "avx2,fma", __m256, F32_256_INIT, _mm256_set1_ps(1e-3f), _mm256_set1_ps(1e-6f), F32_256_STEP, 2 * 8)
PEAK_KERNEL(u8s8_avx512vnni, "avx512f,avx512vnni", __m512i, I32_512_INIT, _mm512_set1_epi8(3), _mm512_set1_epi8(-2),
            U8S8_512_STEP, 2 * 64)
PEAK_KERNEL(u8s8_avxvnni, "avx2,avxvnni", __m256i, I32_256_INIT, _mm256_set1_epi8(3), _mm256_set1_epi8(-2), U8S8_256_STEP,
            2 * 32)

// One pair step into accumulator ymmA from operands ymmX (4 of them: ymm8-11) and ymmY (2: ymm12, ymm13); ymm14 holds
// the product (renamed, so the steps stay independent) and ymm15 the int16 ones.
#define U8S8_PAIR_STEP(A, X, Y) \
  "vpmaddubsw %%ymm" #Y ", %%ymm" #X ", %%ymm14\n vpmaddwd %%ymm15, %%ymm14, %%ymm14\n vpaddd %%ymm14, %%ymm" #A ", %%ymm" #A "\n"
#define S16_PAIR_STEP(A, X, Y) "vpmaddwd %%ymm" #Y ", %%ymm" #X ", %%ymm14\n vpaddd %%ymm14, %%ymm" #A ", %%ymm" #A "\n"
#define PAIR_STEPS(STEP) \
  STEP(0, 8, 12) STEP(1, 9, 12) STEP(2, 10, 12) STEP(3, 11, 12) STEP(4, 8, 13) STEP(5, 9, 13) STEP(6, 10, 13) STEP(7, 11, 13)
#define PAIR_KERNEL(NAME, STEP, OPS)                                                                      \
  __attribute__((target("avx2"))) double NAME(void* sink) {                                                \
    long n = INNER;                                                                                        \
    asm volatile(                                                                                          \
        "vpcmpeqw %%ymm15, %%ymm15, %%ymm15\n vpsrlw $15, %%ymm15, %%ymm15\n" /* int16 ones */              \
        "vmovdqa %%ymm15, %%ymm8\n vpaddw %%ymm15, %%ymm8, %%ymm9\n vpaddw %%ymm15, %%ymm9, %%ymm10\n"      \
        "vpaddw %%ymm15, %%ymm10, %%ymm11\n vpsubw %%ymm15, %%ymm15, %%ymm12\n vpsubw %%ymm15, %%ymm12, %%ymm12\n" \
        "vpsubw %%ymm15, %%ymm12, %%ymm13\n"                                                             \
        "vpxor %%ymm0, %%ymm0, %%ymm0\n vmovdqa %%ymm0, %%ymm1\n vmovdqa %%ymm0, %%ymm2\n vmovdqa %%ymm0, %%ymm3\n" \
        "vmovdqa %%ymm0, %%ymm4\n vmovdqa %%ymm0, %%ymm5\n vmovdqa %%ymm0, %%ymm6\n vmovdqa %%ymm0, %%ymm7\n" \
        "1:\n" PAIR_STEPS(STEP) "dec %0\n jnz 1b\n"                                                      \
        "vmovdqu %%ymm0, (%1)\n vmovdqu %%ymm7, 32(%1)\n vzeroupper\n"                                     \
        : "+r"(n)                                                                                          \
        : "r"(sink)                                                                                        \
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");                                                    \
    return double(OPS) * 8 * INNER;                                                                        \
  }

PAIR_KERNEL(u8s8_avx2, U8S8_PAIR_STEP, 2 * 32)
PAIR_KERNEL(s16_avx2, S16_PAIR_STEP, 2 * 16)

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
