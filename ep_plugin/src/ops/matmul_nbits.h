// What MatMulNBitsGroup (matmul_nbits_group.cc) needs of com.microsoft MatMulNBits (matmul_nbits.cc) to run several
// of them as one step: each part's int8-activation pieces, A quantized by one of them for all.
#pragma once

#include <memory>

#include "op.h"

namespace optim {

constexpr const char* kMicrosoftDomain = "com.microsoft";

// A's rows in the int8-activation layout (kernel_table.h's MatMulNBitsQ8Args), in the run's scratch.
struct Q8Rows {
  const int8_t* aq;
  const float* a_scale;
  const float* a_zero;
};

class MatMulNBitsPart : public Op {
 public:
  // After prepare: whether the node runs with int8 activations (else only run() applies).
  virtual bool q8() const = 0;
  virtual int64_t n() const = 0;
  // A's m rows quantized per row and block into rc's scratch (scratch_bytes' worth).
  virtual Q8Rows quantize_rows(const RunContext& rc, const float* a, int64_t m) const = 0;
  // The kernel's arguments for this node's weights against those rows, output c.
  virtual kernels::MatMulNBitsQ8Args q8_args(const Q8Rows& rows, float* c) const = 0;
  // Columns per pool task for m rows.
  virtual int64_t columns_per_task(int64_t m) const = 0;
};

// A MatMulNBits node (checked as the registry checks it) as a part.
std::unique_ptr<MatMulNBitsPart> create_matmul_nbits_part(const Node& n, const Graph& g);

}  // namespace optim
