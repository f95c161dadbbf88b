// How one GEMM's C splits into tasks over ORT's thread pool, for the float (sgemm_driver.cc) and the int8
// (qgemm.cc) drivers alike: tiles of rows x B panels small enough to keep A's and B's slices in L1/L2 and many
// enough for the pool; a product too small to pay for threading runs inline.
#pragma once

#include <algorithm>
#include <functional>
#include <thread>

#include "op.h"

namespace optim {

// What runs on each finished block of C, rows [m0, m1) by columns [j0, j1), while it is in cache.
using TileDone = std::function<void(int64_t m0, int64_t m1, int64_t j0, int64_t j1)>;

// Multiply-adds x 2 under which a GEMM runs on the calling thread.
constexpr double kGemmInlineOps = 2e5;

struct GemmTiles {
  int64_t nr = 1;                // columns per B panel
  int64_t rows_per_task = 1;     // a multiple of the kernel's rows per register block
  int64_t panels_per_task = 4;
};

// Rows per task of a GEMM whose A rows are `a_row_bytes` each, over B panels of `nr` columns taken
// `panels_per_task` at a time: each task streams its panels of B once for all its rows, so with fixed 48- or
// 64-row tasks ViT's 197 rows read B (9 MB of float MLP weights, 4.7 MB as int16 pairs) four or five times from
// L3. So as many rows as keep the task's A in L2 (kGemmTaskABytes), in even shares (ViT's 197 x 3072 int16 A:
// 100 + 97 rows, not 64 + 64 + 64 + 5), while the columns alone give the pool enough tasks; else `least` rows.
// The result is a multiple of `mr` (the kernel's rows per register block) where `least` is. "Enough": 8, or
// twice the CPU's hardware threads where it has more than 4 (the pool's size is not known here; a many-core host
// keeps its row tasks).
constexpr double kGemmTaskABytes = 1 << 20;
inline int64_t gemm_min_column_tasks() {
  static const int64_t tasks = std::max<int64_t>(8, 2 * static_cast<int64_t>(std::thread::hardware_concurrency()));
  return tasks;
}
inline int64_t gemm_task_rows(int64_t m, int64_t n, int64_t nr, int64_t panels_per_task, double a_row_bytes, int64_t least,
                              int64_t mr) {
  const int64_t column_tasks = ((n + nr - 1) / nr + panels_per_task - 1) / panels_per_task;
  if (column_tasks < gemm_min_column_tasks() || m <= 0) return least;
  const int64_t fit = static_cast<int64_t>(kGemmTaskABytes / std::max(a_row_bytes, 1.0));
  const int64_t cap = std::max(least, fit / mr * mr), tasks = (m + cap - 1) / cap;
  return ((m + tasks - 1) / tasks + mr - 1) / mr * mr;
}

// Runs gemm(m0, m1, p0, p1) on every tile of C [m x n] (`ops`: 2 x m x n x k), then `done`, if given, on the tile's
// columns [p0 * nr, min(n, p1 * nr)).
template <typename Gemm>
void run_gemm_tiles(const RunContext& rc, int64_t m, int64_t n, double ops, const GemmTiles& t, const Gemm& gemm,
                    const TileDone* done) {
  const int64_t panels = (n + t.nr - 1) / t.nr;
  const int64_t m_tasks = (m + t.rows_per_task - 1) / t.rows_per_task;
  const int64_t p_tasks = (panels + t.panels_per_task - 1) / t.panels_per_task;
  if (ops < kGemmInlineOps || m_tasks * p_tasks == 1) {
    gemm(int64_t{0}, m, int64_t{0}, panels);
    if (done) (*done)(0, m, 0, n);
    return;
  }
  rc.parallel_for(static_cast<size_t>(m_tasks * p_tasks), [&](size_t task) {
    const int64_t mt = static_cast<int64_t>(task) / p_tasks, pt = static_cast<int64_t>(task) % p_tasks;
    const int64_t m0 = mt * t.rows_per_task, m1 = std::min(m, m0 + t.rows_per_task);
    const int64_t p0 = pt * t.panels_per_task, p1 = std::min(panels, p0 + t.panels_per_task);
    gemm(m0, m1, p0, p1);
    if (done) (*done)(m0, m1, p0 * t.nr, std::min(n, p1 * t.nr));
  });
}

}  // namespace optim
