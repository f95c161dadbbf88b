// x * HardSigmoid(x) -> one HardSwish step. ONNX's HardSwish is a function (HardSigmoid then Mul), and
// ONNX Runtime hands OptimEP the two nodes; as one step the tensor is read once. The HardSigmoid's own
// alpha and beta are kept, so the result is the same arithmetic either way.
#pragma once

#include <string>
#include <vector>

#include "../ir.h"

namespace optim {

// Returns the number of pairs fused. `outputs`: the partition's outputs.
size_t fuse_hardswish(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
