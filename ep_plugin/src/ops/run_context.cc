#include <algorithm>
#include <atomic>
#include <mutex>

#include "op.h"

namespace optim {
namespace {

// Carries fn across ORT's C callback and brings worker exceptions back to the caller's thread
// (an exception escaping into ORT's thread pool would terminate the host).
struct ParallelState {
  const std::function<void(size_t)>* fn;
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
};

void trampoline(void* user, size_t i) {
  auto* s = static_cast<ParallelState*>(user);
  if (s->failed.load(std::memory_order_relaxed)) return;
  try {
    (*s->fn)(i);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->failed.exchange(true)) s->error = e.what();
  } catch (...) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->failed.exchange(true)) s->error = "unknown error in a worker thread";
  }
}

}  // namespace

void RunContext::parallel_for(size_t n, const std::function<void(size_t)>& fn) const {
  if (n == 0) return;
  if (n == 1 || ctx_ == nullptr) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  ParallelState state;
  state.fn = &fn;
  OPTIM_CHECK(ort().KernelContext_ParallelFor(ctx_, trampoline, n, 0, &state));
  if (state.failed) throw Error(state.error);
}

void parallel_chunks(const RunContext& rc, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(64, n / kParallelChunk));
  const int64_t step = (n + tasks - 1) / tasks;
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t b = static_cast<int64_t>(t) * step;
    const int64_t e = std::min(n, b + step);
    if (b < e) fn(b, e);
  });
}

void parallel_rows(const RunContext& rc, int64_t rows, int64_t row_len, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(1, row_len));
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(64, rows / per_task));
  const int64_t step = (rows + tasks - 1) / tasks;
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t b = static_cast<int64_t>(t) * step;
    if (b < rows) fn(b, std::min(rows, b + step));
  });
}

}  // namespace optim
