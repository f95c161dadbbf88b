#include "strided_copy.h"

#include <algorithm>
#include <cstring>

namespace optim {
namespace {

// Moves n elements of T from src (stride ss) to dst (stride ds).
template <typename T>
void move_run(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds, int64_t n) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
}

// Drops dims of size 1 and merges a dim into the next when both layouts step through them as one.
StridedBox simplify(const StridedBox& b) {
  StridedBox out;
  for (size_t d = 0; d < b.size.size(); ++d) {
    if (b.size[d] == 1) continue;
    out.add_dim(b.size[d], b.src_stride[d], b.dst_stride[d]);
  }
  // Merge from the inside out: dim d folds into d + 1 when d's strides are d+1's times its size.
  StridedBox merged;
  for (size_t d = out.size.size(); d-- > 0;) {
    if (!merged.size.empty()) {
      const int64_t n = merged.size.front();
      if (out.src_stride[d] == merged.src_stride.front() * n && out.dst_stride[d] == merged.dst_stride.front() * n) {
        merged.size.front() *= out.size[d];
        continue;
      }
    }
    merged.size.insert(merged.size.begin(), out.size[d]);
    merged.src_stride.insert(merged.src_stride.begin(), out.src_stride[d]);
    merged.dst_stride.insert(merged.dst_stride.begin(), out.dst_stride[d]);
  }
  if (merged.size.empty()) merged.add_dim(1, 1, 1);  // a single element
  return merged;
}

}  // namespace

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

void copy_box(const RunContext& rc, const void* src, void* dst, size_t elem_size, StridedBox box) {
  for (int64_t n : box.size)
    if (n <= 0) return;
  const StridedBox b = simplify(box);
  const size_t r = b.size.size();
  const int64_t inner = b.size[r - 1], iss = b.src_stride[r - 1], ids = b.dst_stride[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= b.size[d];
  const auto* s0 = static_cast<const uint8_t*>(src);
  auto* d0 = static_cast<uint8_t*>(dst);
  const int64_t es = static_cast<int64_t>(elem_size);
  auto copy_rows = [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      int64_t rem = row, so = 0, dof = 0;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % b.size[d];
        rem /= b.size[d];
        so += i * b.src_stride[d];
        dof += i * b.dst_stride[d];
      }
      const uint8_t* s = s0 + so * es;
      uint8_t* t = d0 + dof * es;
      if (iss == 1 && ids == 1) {
        std::memcpy(t, s, static_cast<size_t>(inner) * elem_size);
        continue;
      }
      switch (elem_size) {
        case 1: move_run<uint8_t>(s, iss, t, ids, inner); break;
        case 2: move_run<uint16_t>(s, iss, t, ids, inner); break;
        case 4: move_run<uint32_t>(s, iss, t, ids, inner); break;
        case 8: move_run<uint64_t>(s, iss, t, ids, inner); break;
        default:
          for (int64_t i = 0; i < inner; ++i) std::memcpy(t + i * ids * es, s + i * iss * es, elem_size);
      }
    }
  };
  parallel_rows(rc, rows, inner, copy_rows);
}

}  // namespace optim
