// Activations exporters write as a product with the input, folded into one step that reads the tensor once:
//   x * HardSigmoid(x) -> HardSwish (ONNX's HardSwish function, which ONNX Runtime inlines; the HardSigmoid's
//                         own alpha and beta are kept, so the arithmetic is the same)
//   x * Sigmoid(x)     -> Silu (internal: SiLU / Swish, as EfficientNet and YOLO write it)
#pragma once

#include <string>
#include <vector>

#include "../ir.h"

namespace optim {

// Returns the number of pairs fused. `outputs`: the partition's outputs.
size_t fuse_activations(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
