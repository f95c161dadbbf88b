// Rewrites the exact GELU as exporters write it out, x * 0.5 * (1 + erf(x / sqrt 2)) in five nodes
// (Div or Mul, Erf, Add, Mul, Mul in either order), into one Gelu node inside a partition: one pass
// over the tensor instead of five.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace optim {

// `outputs`: the partition's outputs (values that must survive). Returns the number of GELUs fused.
size_t fuse_gelu(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
