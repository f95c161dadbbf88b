// Folds what follows a float channels-last convolution into its epilogue (ops/conv_nhwc.cc):
//   NhwcConv -> Add(other of the same shape) -> Relu | Clip(constant bounds) -> HardSwish | HardSigmoid |
//   LeakyRelu | SiLU
// becomes one NhwcConv with `other` as its residual input (input 3), activation_min / activation_max and
// activation (+ activation_alpha / _beta), so the sum, clamp and activation happen while the outputs are
// still in registers. Runs after to_channels_last (and activation_fusion, which makes the SiLUs).
#pragma once

#include <string>
#include <vector>

#include "../ir.h"

namespace optim {

// Returns the number of Add / Relu / Clip nodes folded. `outputs`: the partition's outputs.
size_t fuse_conv_epilogues(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
