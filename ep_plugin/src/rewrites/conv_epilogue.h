// Folds what follows a float channels-last convolution into its epilogue (ops/conv_nhwc.cc):
//   NhwcConv -> Add(other of the same shape) -> Relu | Clip(constant bounds)
// becomes one NhwcConv with `other` as its residual input (input 3) and activation_min / activation_max,
// so the sum and the clamp happen while the outputs are still in registers. Runs after to_channels_last.
#pragma once

#include <string>
#include <vector>

#include "../ir.h"

namespace optim {

// Returns the number of Add / Relu / Clip nodes folded. `outputs`: the partition's outputs.
size_t fuse_conv_epilogues(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
