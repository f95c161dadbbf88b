// QMatMul's operands for the u8 x s8 kernels (VNNI, AMX, AVX2's pair kernel): both are activations with a
// zero point, so neither fits the kernels as it is. A is stored as uint8 (int8 flipped by +128, its zero point
// with it); B as int8 w = b - 128 (uint8) or b (int8), so that b - zb = w + off with off = 128 - zb or -zb.
// Then, exactly in int32,
//   sum_k (a_k - za)(b_k - zb) = sum_k a_k w_k  - za sum_k w_k - za off K  +  off sum_k a_k
// the middle terms per column (the kernels' compensation), the last per row (QgemmEpilogue::acc_row).
#pragma once

#include <cstdint>
#include <vector>

#include "op.h"
#include "../aligned_vector.h"

namespace optim {

// One matrix of the batch ready for qgemm_u8s8 (the buffers are reused from matrix to matrix).
struct U8s8Matrix {
  int64_t kq = 0, lda = 0;  // K in quads (padded to the kernel's multiple), A's row stride in bytes
  std::vector<uint8_t> a;   // m rows + the kernel's row_pad zero rows
  AlignedVector<int8_t> packed;
  std::vector<int32_t> comp_col, comp_row;  // comp_row holds A's row sums until u8s8_finish
};

struct U8s8Operand {
  const void* data = nullptr;  // this matrix's first element
  bool is_u8 = true;
  int32_t zero = 0;
};

// Sizes the buffers for an m x k by k x n product on a kernel with these traits.
void u8s8_size(U8s8Matrix& mm, int64_t m, int64_t k, int64_t n, const kernels::KernelTraits& traits);
// A's rows [r0, r1): stored bytes, padding and row sums. With `pairs`, returns the largest a_k + a_k+1 among
// them (k even: the pairs a pair kernel sums in int16); else 0.
int32_t u8s8_rows(U8s8Matrix& mm, const U8s8Operand& a, int64_t r0, int64_t r1, int64_t k, bool pairs);
// After every row: B as int8 and packed, the column compensation, and comp_row from the row sums. False, with
// nothing packed, when a pair kernel could saturate: max_pair (over all rows) x max |w| above 32767.
bool u8s8_finish(U8s8Matrix& mm, const U8s8Operand& a, const U8s8Operand& b, int64_t m, int64_t k, int64_t n,
                 bool int16_pairs, int32_t max_pair);

}  // namespace optim
