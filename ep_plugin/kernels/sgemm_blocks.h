// The order of a float GEMM kernel's register tiles over one column block (a panel or a pair), shared by the
// AVX2 and AVX-512 kernels: K in blocks of kSgemmBlockK, so that a block of the column block's panels stays in
// L1 while the row tiles of up to `chunk` rows run over it (unblocked, each tile streamed the whole panels
// from L2: 96 KB at K = 768 for AVX-512's pair). A block's sums wait in the caller's `partial` rows and start
// the next block's, so each output is still one chain of FMAs in k order.
#pragma once

#include <algorithm>
#include <cstdint>

namespace optim::kernels {

constexpr int64_t kSgemmBlockK = 256;

// tile(i, rows, k0, kc, sums, resume): rows i.. of K values k0..k0+kc into `sums` (`stride` floats a row),
// starting from them when `resume`; store(i, rows, sums) after the last block (once, even for k = 0).
template <typename Tile, typename Store>
inline void sgemm_k_blocks(int64_t m0, int64_t m1, int64_t k, int64_t mr, int64_t chunk, float* partial, int64_t stride,
                           const Tile& tile, const Store& store) {
  for (int64_t c0 = m0; c0 < m1; c0 += chunk) {
    const int64_t c1 = std::min(m1, c0 + chunk);
    for (int64_t k0 = 0;; k0 += kSgemmBlockK) {
      const int64_t kc = std::min(kSgemmBlockK, k - k0);
      const bool last = k0 + kc >= k;
      for (int64_t i = c0; i < c1; i += mr) {
        const int64_t rows = std::min(mr, c1 - i);
        float* sums = partial + (i - c0) * stride;
        tile(i, rows, k0, kc, sums, k0 > 0);
        if (last) store(i, rows, sums);
      }
      if (last) break;
    }
  }
}

}  // namespace optim::kernels
