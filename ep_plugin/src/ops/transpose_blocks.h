// Batched matrix transposes in cache-sized blocks over the pool: the layout changes (layout.cc) and every
// Transpose that swaps two groups of dims (shape_ops.cc: [.., A, B] -> [.., B, A], e.g. perm 0,2,1 in
// transformers, NCHW <-> NHWC). 4-byte and 1-byte elements go through the kernel table's transposes.
#pragma once

#include "op.h"

namespace optim {

// For each of `batches` matrices, dst (cols x rows) = transpose of src (rows x cols); elements of
// elem_bytes (1, 2, 4 or 8).
void transpose_batched(const RunContext& rc, const void* src, void* dst, int64_t batches, int64_t rows, int64_t cols,
                       size_t elem_bytes);

}  // namespace optim
