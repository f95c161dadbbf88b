#include "transpose_blocks.h"

#include <algorithm>
#include <cstring>

namespace optim {
namespace {

constexpr int64_t kBlock = 64;

// Few rows (an RGB image going channels last) or few columns (coming back): 8 x 8 blocks would all be
// edges, done element by element with strided stores. Here each output row is gathered from kFew streams
// read in order (or each input row scattered into kFew streams), kFew known to the compiler.
template <typename T, int kFew>
void few_rows(const T* src, T* dst, int64_t cols, int64_t j0, int64_t j1) {  // src kFew x cols
  for (int64_t j = j0; j < j1; ++j)
    for (int i = 0; i < kFew; ++i) dst[j * kFew + i] = src[i * cols + j];
}
template <typename T, int kFew>
void few_cols(const T* src, T* dst, int64_t rows, int64_t i0, int64_t i1) {  // src rows x kFew
  for (int64_t i = i0; i < i1; ++i)
    for (int j = 0; j < kFew; ++j) dst[j * rows + i] = src[i * kFew + j];
}
template <typename T, int kFew>
void run_few(const RunContext& rc, const T* src, T* dst, int64_t batches, int64_t rows, int64_t cols) {
  const bool by_rows = rows == kFew;
  const int64_t len = by_rows ? cols : rows, total = batches * len;
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / kFew), tasks = (total + per_task - 1) / per_task;
  // Tasks over the long dimension of all matrices in a row, so many small matrices share a task.
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    int64_t f = static_cast<int64_t>(t) * per_task;
    const int64_t f_end = std::min(total, f + per_task);
    while (f < f_end) {
      const int64_t m = f / len, a = f % len, b = std::min(len, a + (f_end - f));
      const T* s = src + m * rows * cols;
      T* d = dst + m * rows * cols;
      if (by_rows) few_rows<T, kFew>(s, d, cols, a, b);
      else few_cols<T, kFew>(s, d, rows, a, b);
      f += b - a;
    }
  });
}

template <typename T>
void run(const RunContext& rc, const T* src, T* dst, int64_t batches, int64_t rows, int64_t cols) {
  if (rows == 1 || cols == 1) {  // the same bytes in the same order
    std::memcpy(dst, src, static_cast<size_t>(batches * rows * cols) * sizeof(T));
    return;
  }
  switch (std::min(rows, cols)) {
    case 2: return run_few<T, 2>(rc, src, dst, batches, rows, cols);
    case 3: return run_few<T, 3>(rc, src, dst, batches, rows, cols);
    case 4: return run_few<T, 4>(rc, src, dst, batches, rows, cols);
    default: break;
  }
  const int64_t rb = (rows + kBlock - 1) / kBlock, cb = (cols + kBlock - 1) / kBlock;
  const int64_t blocks = batches * rb * cb;
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / (kBlock * kBlock));
  const int64_t tasks = (blocks + per_task - 1) / per_task;
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t b1 = std::min(blocks, (static_cast<int64_t>(t) + 1) * per_task);
    for (int64_t b = static_cast<int64_t>(t) * per_task; b < b1; ++b) {
      const int64_t m = b / (rb * cb), r = b % (rb * cb) / cb * kBlock, c = b % cb * kBlock;
      const int64_t nr = std::min(rows - r, kBlock), nc = std::min(cols - c, kBlock);
      const T* s = src + m * rows * cols + r * cols + c;
      T* d = dst + m * rows * cols + c * rows + r;
      if constexpr (sizeof(T) == 4) {
        rc.kernels.transpose32(s, cols, d, rows, nr, nc);
      } else if constexpr (sizeof(T) == 1) {
        rc.kernels.transpose8(s, cols, d, rows, nr, nc);
      } else {
        for (int64_t j = 0; j < nc; ++j)
          for (int64_t i = 0; i < nr; ++i) d[j * rows + i] = s[i * cols + j];
      }
    }
  });
}

}  // namespace

void transpose_batched(const RunContext& rc, const void* src, void* dst, int64_t batches, int64_t rows, int64_t cols,
                       size_t elem_bytes) {
  if (batches * rows * cols == 0) return;
  switch (elem_bytes) {
    case 1: return run(rc, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), batches, rows, cols);
    case 2: return run(rc, static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), batches, rows, cols);
    case 4: return run(rc, static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), batches, rows, cols);
    case 8: return run(rc, static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), batches, rows, cols);
    default: throw Error("cannot transpose elements of " + std::to_string(elem_bytes) + " bytes");
  }
}

}  // namespace optim
