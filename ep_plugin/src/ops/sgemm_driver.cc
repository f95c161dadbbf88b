#include "sgemm_driver.h"

#include <algorithm>
#include <vector>

namespace optim {

namespace {

// The tasks of one GEMM over the pool, each running gemm(m0, m1, p0, p1) on a tile of rows x B panels.
// mr: the kernel's rows per tile, which a task's rows are a multiple of.
template <typename Gemm>
void run_gemm_tasks(const RunContext& rc, int64_t m, int64_t n, int64_t k, int64_t mr, const Gemm& gemm,
                    const SgemmAfter* after) {
  if (m <= 0 || n <= 0) return;
  constexpr int64_t kPanelsPerTask = 4;
  const int64_t least = (8 * kernels::kSgemmMR + mr - 1) / mr * mr;
  const int64_t rows = gemm_task_rows(m, n, kernels::kSgemmNR, kPanelsPerTask, static_cast<double>(k) * sizeof(float),
                                      least, mr);
  const GemmTiles tiles{kernels::kSgemmNR, rows, kPanelsPerTask};
  run_gemm_tiles(rc, m, n, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k), tiles, gemm,
                 after);
}

}  // namespace

void run_sgemm(const RunContext& rc, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b_packed, float* c, int64_t ldc, const kernels::SgemmEpilogue& ep,
               const SgemmAfter* after) {
  run_gemm_tasks(rc, m, n, k, 1, [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
    rc.kernels.sgemm(m0, m1, p0, p1, n, k, a, lda, b_packed, c, ldc, ep);
  }, after);
}

void run_sgemm(const RunContext& rc, int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c, int64_t ldc,
               const kernels::SgemmEpilogue& ep, const SgemmAfter* after) {
  if (b.bf16.empty()) return run_sgemm(rc, m, b.n, b.k, a, lda, b.data.data(), c, ldc, ep, after);
  if (!rc.kernels.sgemm_bf16) throw Error("the weights were packed for the bf16 GEMM, which this kernel table lacks");
  if (m <= 0 || b.n <= 0) return;
  // A rounded to bf16 once, in parallel, into rows the kernels read whole (sgemm_bf16_row, 32 rows of zero
  // padding past the last: whole AMX tiles). A buffer of the calling thread: concurrent runs each have theirs.
  const int64_t row = kernels::sgemm_bf16_row(b.k), rows = (m + 31) / 32 * 32;
  thread_local std::vector<uint16_t> a16;
  a16.resize(static_cast<size_t>(rows * row));
  std::fill(a16.begin() + m * row, a16.end(), uint16_t{0});
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(b.k, 1));
  uint16_t* dst = a16.data();
  rc.parallel_for(static_cast<size_t>((m + per_task - 1) / per_task), [&](size_t t) {
    const int64_t r0 = static_cast<int64_t>(t) * per_task;
    rc.kernels.convert_bf16(a, lda, b.k, r0, std::min(m, r0 + per_task), dst);
  });
  run_gemm_tasks(rc, m, b.n, b.k, rc.kernels.sgemm_bf16.traits.mr, [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
    rc.kernels.sgemm_bf16(m0, m1, p0, p1, b.n, b.k, dst, row, b.bf16.data(), c, ldc, ep);
  }, after);
}

void PackedMatrix::use_bf16(const kernels::KernelTable& kt) {
  if (!kt.sgemm_bf16 || data.empty()) return;
  bf16.resize(kernels::sgemm_bf16_packed_b_elems(k, n));
  kernels::sgemm_bf16_pack_from_f32(data.data(), k, n, bf16.data());
  data.clear();
  data.shrink_to_fit();
  bf16_kernel = kt.sgemm_bf16.name;
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
