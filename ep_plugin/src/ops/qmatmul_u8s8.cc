// QMatMul's operands for the u8 x s8 kernels (qmatmul_u8s8.h).
#include "qmatmul_u8s8.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace optim {
namespace {

// The stored uint8 of a value of A (int8 flipped by +128) and the zero point that goes with it.
int32_t stored_zero(const U8s8Operand& a) { return a.is_u8 ? a.zero : a.zero + 128; }

// B's offset: b - zb = w + off with w its int8 form.
int32_t b_offset(const U8s8Operand& b) { return b.is_u8 ? 128 - b.zero : -b.zero; }

}  // namespace

void u8s8_size(U8s8Matrix& mm, int64_t m, int64_t k, int64_t n, const kernels::KernelTraits& traits) {
  const int64_t mult = std::max<int64_t>(1, traits.k_multiple / 4);  // in quads
  mm.kq = ((k + 3) / 4 + mult - 1) / mult * mult;
  mm.lda = 4 * mm.kq;
  mm.a.resize(static_cast<size_t>((m + traits.row_pad) * mm.lda));
  // Rows the kernel reads past m (AMX tiles) stay zero.
  std::memset(mm.a.data() + m * mm.lda, 0, static_cast<size_t>(traits.row_pad * mm.lda));
  mm.packed.resize(kernels::qgemm_u8s8_packed_b_bytes(mm.kq, n));
  mm.comp_col.resize(static_cast<size_t>(n));
  mm.comp_row.resize(static_cast<size_t>(m));
}

int32_t u8s8_rows(U8s8Matrix& mm, const U8s8Operand& a, int64_t r0, int64_t r1, int64_t k, bool pairs) {
  const uint8_t flip = a.is_u8 ? 0 : 0x80;
  int32_t max_pair = 0;
  for (int64_t i = r0; i < r1; ++i) {
    const uint8_t* __restrict src = static_cast<const uint8_t*>(a.data) + i * k;
    uint8_t* __restrict row = mm.a.data() + i * mm.lda;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      row[kk] = static_cast<uint8_t>(src[kk] ^ flip);
      sum += row[kk];
    }
    std::memset(row + k, 0, static_cast<size_t>(mm.lda - k));
    if (pairs)
      for (int64_t kk = 0; kk < k; kk += 2) max_pair = std::max<int32_t>(max_pair, row[kk] + row[kk + 1]);
    mm.comp_row[static_cast<size_t>(i)] = sum;
  }
  return max_pair;
}

bool u8s8_finish(U8s8Matrix& mm, const U8s8Operand& a, const U8s8Operand& b, int64_t m, int64_t k, int64_t n,
                 bool int16_pairs, int32_t max_pair) {
  // w = (b ^ flip) as int8; u = w + 128 as uint8 gives w's column sums and extremes in unsigned arithmetic.
  const uint8_t flip = b.is_u8 ? 0x80 : 0, to_u = flip ^ 0x80;
  const uint8_t* src = static_cast<const uint8_t*>(b.data);
  int32_t* __restrict sums = mm.comp_col.data();
  std::fill(mm.comp_col.begin(), mm.comp_col.end(), 0);
  uint8_t lo = 255, hi = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    const uint8_t* __restrict row = src + kk * n;
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t u = row[j] ^ to_u;
      sums[j] += u;
      lo = std::min(lo, u);
      hi = std::max(hi, u);
    }
  }
  const int32_t max_abs = k ? std::max(128 - lo, hi - 128) : 0;
  if (int16_pairs && max_pair * max_abs > 32767) return false;
  kernels::qgemm_u8s8_pack_b_bytes(src, n, flip, k, n, mm.kq, mm.packed.data());
  const int32_t za = stored_zero(a), off = b_offset(b), kk = static_cast<int32_t>(k);
  for (int64_t j = 0; j < n; ++j) sums[j] = -za * off * kk - za * (sums[j] - 128 * kk);  // sum_k w = sum_k u - 128 K
  for (int64_t i = 0; i < m; ++i) mm.comp_row[static_cast<size_t>(i)] *= off;
  return true;
}

}  // namespace optim
