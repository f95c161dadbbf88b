// The channels-last rewrite: inside a partition, convolutions run on [N, H, W, C] tensors (ops/conv_nhwc.h),
// and so do the ops around them that do not care about the layout (element-wise ops, Concat, pooling,
// Quantize/DequantizeLinear per tensor), so that the layout changes only at the region's edges:
//   x -> ToNhwc -> NhwcConv -> Relu -> NhwcMaxPool -> NhwcQConv ... -> ToNchw -> (partition output, or an
//   op that needs NCHW: Reshape, Flatten, Gemm...)
// Partition inputs and outputs keep ONNX's NCHW layout. Constants read by moved ops are re-laid once here.
#pragma once

#include <string>
#include <vector>

#include "../ir.h"

namespace optim {

struct LayoutReport {
  size_t convolutions = 0;  // Conv / QConv moved to channels last
  size_t moved = 0;         // other ops moved with them
  size_t layout_changes = 0;  // ToNhwc / ToNchw nodes left in the partition
};

// `outputs`: the partition's outputs (they keep their NCHW layout).
LayoutReport to_channels_last(Graph& g, const std::vector<std::string>& outputs);

}  // namespace optim
