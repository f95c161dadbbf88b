// An int8 MobileNet block in one pass (rewrites/qdepthwise_block.cc): a depthwise NhwcQConv and the 1x1
// NhwcQConv that alone reads it (the projection, maybe with its residual QAdd), with the 1x1 expansion that
// alone feeds the depthwise before them where that pays, or a depthwise with only that expansion (its output
// read by others: a squeeze-excite). Like the float fold (conv_dw_pw.h), runs of bands of output rows of one
// image (depthwise_bands.h): a band's input rows come from the expansion, requantized exactly as the unit
// alone would, then converted to float32 for the depthwise kernel; the depthwise writes a tile in cache that
// the projection reads at once (for a projection on int16 pairs, as the int16 q - zero it would widen the bytes
// to). The expanded and depthwise tensors never go to memory; the bytes equal the units run one by one.
//
// Node form: the last unit's own NhwcQConv node (its GEMM's inputs, its Stage::kAdd if any, and attributes as
// qconv_nhwc.h reads them), its input 0 the block's input. A depthwise before it (the host is the projection):
// stage Stage::kDepthwise (unit_stages.h: its parameters, x scale to y zero point) and its attributes prefixed
// "dw_" ("dw_group" always set, even to 1); an expansion: stage Stage::kExpansion and attributes prefixed "ex_".
#pragma once

#include <memory>

#include "qadd_after.h"

namespace optim {

// Whether NhwcQConv node n is such a block.
bool is_qconv_block(const Node& n);
// The NhwcQConv node unit `prefix` ("dw_", "ex_", or "" for the host's own) of block n was, reading the
// block's input 0 and making its output (their types are the unit's own: the rewrite folds uint8 links only).
Node qconv_block_unit(const Node& n, const std::string& prefix);
// The op of an NhwcQConv node: a block when n is one, else the unit alone.
std::unique_ptr<Op> create_nhwc_qconv(const Node& n, const Graph& g);

}  // namespace optim
