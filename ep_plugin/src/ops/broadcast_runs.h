// A numpy-broadcast binary op's output seen as rows of one run each: within a run every input either
// advances with the output (step 1) or repeats one element (step 0), so a strided kernel takes a whole run;
// the rows are the remaining outer dims, walked with per-input strides.
#pragma once

#include <algorithm>
#include <vector>

#include "op.h"

namespace optim {

class BroadcastRuns {
 public:
  BroadcastRuns(const Shape& out, const Shape& a, const Shape& b) {
    const size_t r = out.size();
    auto aligned = [r](const Shape& s) {
      Shape p(r, 1);
      std::copy(s.begin(), s.end(), p.begin() + static_cast<std::ptrdiff_t>(r - s.size()));
      return p;
    };
    const Shape pa = aligned(a), pb = aligned(b);
    // The run: the innermost dims (size-1 ones skipped) where each input keeps one pattern.
    size_t d = r;
    bool set = false;
    for (; d > 0; --d) {
      const size_t i = d - 1;
      if (out[i] == 1) continue;
      const int64_t sa = pa[i] == 1 ? 0 : 1, sb = pb[i] == 1 ? 0 : 1;
      if (set && (sa != a_step || sb != b_step)) break;
      a_step = sa;
      b_step = sb;
      set = true;
      len_ *= out[i];
    }
    // Outer dims: the output's sizes and each input's element strides (0 where it is broadcast).
    int64_t as = a_step ? len_ : 1, bs = b_step ? len_ : 1;
    if (!set) as = bs = 1;
    outer_.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(d));
    a_stride_.resize(d);
    b_stride_.resize(d);
    for (size_t i = d; i-- > 0;) {
      a_stride_[i] = pa[i] == 1 ? 0 : as;
      b_stride_[i] = pb[i] == 1 ? 0 : bs;
      as *= pa[i];
      bs *= pb[i];
    }
    for (int64_t n : outer_) rows_ *= n;
  }

  int64_t rows() const { return rows_; }
  int64_t len() const { return len_; }
  // The first element of each input that row `row` reads.
  void offsets(int64_t row, int64_t* ia, int64_t* ib) const {
    *ia = *ib = 0;
    for (size_t i = outer_.size(); i-- > 0;) {
      const int64_t k = row % outer_[i];
      row /= outer_[i];
      *ia += k * a_stride_[i];
      *ib += k * b_stride_[i];
    }
  }
  // Runs fn(row0, row1) over the rows in parallel tasks (parallel_rows).
  void parallel(const RunContext& rc, const std::function<void(int64_t, int64_t)>& fn) const { parallel_rows(rc, rows_, len_, fn); }

  int64_t a_step = 1, b_step = 1;

 private:
  Shape outer_;
  std::vector<int64_t> a_stride_, b_stride_;
  int64_t rows_ = 1, len_ = 1;
};

}  // namespace optim
