// The stages a fused unit can carry after its own inputs, as named input groups: an integer unit (QGemm,
// NhwcQConv: its GEMM's nine inputs, QGemmInput) or a float channels-last convolution (NhwcConv: x, W, B).
//
// A unit node's inputs are its own, then one group per folded stage in the order the rewrites folded them;
// attribute kStagesAttr lists those stages (Stage values) in that order. A stage's inputs are found by name
// (stage_input), never by a fixed position, so stages compose without an enum chain and no position means two
// things. Each stage's attributes keep their own names (kQAddReluAttr, "dw_group", kGatedAttr, ...): what the
// stage reads, not whether it is there, which has_stage says.
//
// Stage           inputs (in order)                                       folded by (run by)
// integer units:
// kAdd            other, self scale/zero, other scale/zero, y scale/zero  rewrites/qadd_fold.cc (qadd_after.h)
// kDepthwise      a depthwise unit's inputs after x (QGemmInput order)   rewrites/qdepthwise_block.cc (qconv_block.h)
// kExpansion      a 1x1 expansion unit's inputs after x (the same)       rewrites/qdepthwise_block.cc (qconv_block.h)
// kGate           gate, map scale/zero, gate scale/zero, y scale/zero     rewrites/gate_fold.cc (gate_before.h)
// kDequantize     scale, zero, bias (absent: "")                          rewrites/dequantize_fold.cc (dequantize_after.h)
// kRequantize     scale, zero                                             rewrites/dequantize_fold.cc (dequantize_after.h)
// float NhwcConv:
// kResidual       the Add's other operand                                 rewrites/conv_epilogues.cc (conv_nhwc_op.cc)
// kFloatDepthwise W, B of a depthwise convolution before a 1x1 one        rewrites/depthwise_pointwise.cc (conv_dw_pw.h)
// kChannelScale   a squeeze-excite gate [N or 1, 1, 1, C] on the input    rewrites/channel_scales.cc (conv_nhwc_algorithms.h)
// kFloatExpansion W, B of the 1x1 expansion before a depthwise one       rewrites/depthwise_pointwise.cc (conv_dw_pw.h)
#pragma once

#include <string>
#include <vector>

#include "op.h"

namespace optim {

// Input positions of an internal QGemm/QConv node's own GEMM (names of partition values; "" when absent).
// Attributes: transB (QGemm: W stored N x K), relu (a Relu sat between the product and the
// QuantizeLinear), and for QConv the Conv's own attributes.
enum QGemmInput : size_t {
  kQGemmX = 0, kQGemmXScale, kQGemmXZero, kQGemmW, kQGemmWScale, kQGemmWZero, kQGemmBias, kQGemmYScale, kQGemmYZero,
  kQGemmInputCount
};
// The attribute of an NhwcQConv stem whose input's QuantizeLinear, by the unit's own x scale and zero point, is
// folded in (rewrites/nchw_stem.cc): its x is float32, quantized as the unit copies it; its type is the zero point's.
constexpr const char* kQuantizeInputAttr = "quantize_input";

enum class Stage : int64_t {
  kAdd = 0, kDepthwise, kExpansion, kGate, kDequantize, kRequantize,
  kResidual, kFloatDepthwise, kChannelScale, kFloatExpansion
};

// The inputs of each stage, by name (positions inside the stage's group).
enum AddStageInput : size_t { kAddOther = 0, kAddSelfScale, kAddSelfZero, kAddOtherScale, kAddOtherZero, kAddYScale,
                              kAddYZero, kAddInputs };
// kDepthwise / kExpansion: a unit's inputs after x, at QGemmInput position - 1.
constexpr size_t kUnitStageInputs = kQGemmInputCount - 1;
inline constexpr size_t unit_stage_input(QGemmInput i) { return static_cast<size_t>(i) - 1; }
enum GateStageInput : size_t { kGateValue = 0, kGateMapScale, kGateMapZero, kGateScale, kGateZero, kGateYScale,
                               kGateYZero, kGateInputs };
enum DequantizeStageInput : size_t { kDqScale = 0, kDqZero, kDqBias, kDqInputs };
enum RequantizeStageInput : size_t { kRqScale = 0, kRqZero, kRqInputs };
enum FloatConvStageInput : size_t { kStageW = 0, kStageB, kFloatConvInputs };  // kFloatDepthwise, kFloatExpansion
constexpr size_t kNhwcConvOwnInputs = 3;  // x, W, B

constexpr const char* kStagesAttr = "stages";

// How many inputs stage s has; its name ("add", "depthwise", ...) for messages.
size_t stage_inputs(Stage s);
const char* stage_name(Stage s);

// How many inputs unit n has of its own, before its stages: 3 for a float NhwcConv, else kQGemmInputCount.
size_t own_inputs(const Node& n);
// The stages folded into unit n, in order.
std::vector<Stage> unit_stages(const Node& n);
bool has_stage(const Node& n, Stage s);
// The position in n.inputs of input i of stage s; throws Error naming n when n has no such stage or lacks the input.
size_t stage_input(const Node& n, Stage s, size_t i);
// n.inputs[stage_input(n, s, i)], "" when absent.
const std::string& stage_value(const Node& n, Stage s, size_t i);
// Appends stage s to unit n: its inputs `values` (stage_inputs(s) of them; "" where absent) after the groups
// already there, and s to kStagesAttr. Returns the position of the group's first input. For rewrites, which count
// a value's readers: add the group with "" where the value is to be counted, then rewire that input.
size_t add_stage(Node& n, Stage s, const std::vector<std::string>& values);
// stage_input, or -1 when n has no stage s.
int64_t stage_input_or_none(const Node& n, Stage s, size_t i);
// A copy of unit n's own inputs and the stages `keep` (in n's order), without the others: the unit a stage was.
Node unit_with_stages(const Node& n, const std::vector<Stage>& keep);

}  // namespace optim
