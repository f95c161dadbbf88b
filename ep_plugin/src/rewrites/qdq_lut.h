// Quantized element-wise regions as lookup tables. Between DequantizeLinear(x) and QuantizeLinear, per
// tensor, a chain of element-wise float ops whose only varying input is x (uint8/int8; other inputs scalar
// constants, e.g. SiLU as DQ -> Sigmoid -> Q -> DQ -> Mul(DQ(x), .) -> Q, HardSwish, a requantization)
// maps each of x's 256 possible bytes to one output byte. The region becomes one QLut step: the table is
// computed here by running the region's own ops (the kernels the partition runs with) on all 256 bytes,
// so the step gives exactly what the float ops between the Q/DQ pairs would.
#pragma once

#include <string>
#include <vector>

#include "../../kernels/kernel_table.h"
#include "../ir.h"

namespace optim {

// Returns the number of regions folded. `outputs`: the partition's outputs.
size_t fold_qdq_lookup_tables(Graph& g, const std::vector<std::string>& outputs, const kernels::KernelTable& kernels);

}  // namespace optim
