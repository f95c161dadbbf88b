#include "sgemm_driver.h"

#include <algorithm>

namespace optim {

void run_sgemm(const RunContext& rc, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b_packed, float* c, int64_t ldc, const kernels::SgemmEpilogue& ep,
               const SgemmAfter* after) {
  if (m <= 0 || n <= 0) return;
  const int64_t panels = (n + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
  // Tiles of 8 register blocks of rows by 4 panels keep A and B slices in L1/L2 and give enough
  // tasks for the pool; tiny products run inline where threading costs more than it saves.
  const int64_t rows_per_task = 8 * kernels::kSgemmMR;
  const int64_t panels_per_task = 4;
  const int64_t m_tasks = (m + rows_per_task - 1) / rows_per_task;
  const int64_t p_tasks = (panels + panels_per_task - 1) / panels_per_task;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (flops < 2e5 || m_tasks * p_tasks == 1) {
    rc.kernels.sgemm(0, m, 0, panels, n, k, a, lda, b_packed, c, ldc, ep);
    if (after) (*after)(0, m, 0, n);
    return;
  }
  rc.parallel_for(static_cast<size_t>(m_tasks * p_tasks), [&](size_t t) {
    const int64_t mt = static_cast<int64_t>(t) / p_tasks, pt = static_cast<int64_t>(t) % p_tasks;
    const int64_t m0 = mt * rows_per_task, m1 = std::min(m, m0 + rows_per_task);
    const int64_t p0 = pt * panels_per_task, p1 = std::min(panels, p0 + panels_per_task);
    rc.kernels.sgemm(m0, m1, p0, p1, n, k, a, lda, b_packed, c, ldc, ep);
    if (after) (*after)(m0, m1, p0 * kernels::kSgemmNR, std::min(n, p1 * kernels::kSgemmNR));
  });
}

PackedMatrix pack_matrix(const float* b, int64_t k, int64_t n, bool trans_b) {
  PackedMatrix p;
  p.k = k;
  p.n = n;
  p.data.resize(kernels::sgemm_packed_b_floats(k, n));
  kernels::sgemm_pack_b(b, trans_b ? k : n, trans_b, k, n, p.data.data());
  return p;
}

}  // namespace optim
