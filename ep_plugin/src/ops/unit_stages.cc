// Named input groups of a fused unit's folded stages (unit_stages.h).
#include "unit_stages.h"

#include <algorithm>

namespace optim {

namespace {

struct StageSpec {
  const char* name;
  size_t inputs;
};

// One row per Stage value, in its order.
constexpr StageSpec kSpecs[] = {
    {"add", kAddInputs},       {"depthwise", kUnitStageInputs},        {"expansion", kUnitStageInputs},
    {"gate", kGateInputs},     {"dequantize", kDqInputs},              {"requantize", kRqInputs},
    {"residual add", 1},       {"depthwise", kFloatConvInputs},        {"channel scale", 1},
    {"expansion", kFloatConvInputs}};

const StageSpec& spec(Stage s) {
  const auto i = static_cast<size_t>(s);
  if (i >= std::size(kSpecs)) throw Error("unknown unit stage " + std::to_string(i));
  return kSpecs[i];
}

// The position of stage s's first input in n.inputs; throws Error naming n when it has no such stage.
size_t group_start(const Node& n, Stage s) {
  size_t at = own_inputs(n);
  for (Stage t : unit_stages(n)) {
    if (t == s) return at;
    at += spec(t).inputs;
  }
  throw Error(n.label() + ": it has no folded " + spec(s).name + " stage");
}

}  // namespace

size_t stage_inputs(Stage s) { return spec(s).inputs; }
const char* stage_name(Stage s) { return spec(s).name; }

size_t own_inputs(const Node& n) { return n.op == "NhwcConv" ? kNhwcConvOwnInputs : kQGemmInputCount; }

std::vector<Stage> unit_stages(const Node& n) {
  std::vector<Stage> out;
  for (int64_t v : n.attr_ints(kStagesAttr)) out.push_back(static_cast<Stage>(v));
  return out;
}

bool has_stage(const Node& n, Stage s) {
  const auto stages = unit_stages(n);
  return std::find(stages.begin(), stages.end(), s) != stages.end();
}

size_t stage_input(const Node& n, Stage s, size_t i) {
  const size_t at = group_start(n, s) + i;
  if (i >= spec(s).inputs || at >= n.inputs.size())
    throw Error(n.label() + ": its folded " + stage_name(s) + " stage lacks input " + std::to_string(i));
  return at;
}

const std::string& stage_value(const Node& n, Stage s, size_t i) { return n.inputs[stage_input(n, s, i)]; }

int64_t stage_input_or_none(const Node& n, Stage s, size_t i) {
  return has_stage(n, s) ? static_cast<int64_t>(stage_input(n, s, i)) : -1;
}

size_t add_stage(Node& n, Stage s, const std::vector<std::string>& values) {
  if (values.size() != spec(s).inputs)
    throw Error(n.label() + ": a " + stage_name(s) + " stage takes " + std::to_string(spec(s).inputs) + " inputs");
  if (has_stage(n, s)) throw Error(n.label() + ": a " + std::string(stage_name(s)) + " stage is folded in already");
  size_t at = own_inputs(n);
  for (Stage t : unit_stages(n)) at += spec(t).inputs;
  n.inputs.resize(at);  // a GEMM without its trailing optional inputs gets them as ""
  n.inputs.insert(n.inputs.end(), values.begin(), values.end());
  auto stages = n.attr_ints(kStagesAttr);
  stages.push_back(static_cast<int64_t>(s));
  n.set_attr_ints(kStagesAttr, stages);
  return at;
}

Node unit_with_stages(const Node& n, const std::vector<Stage>& keep) {
  Node u = n;
  u.inputs.assign(n.inputs.begin(), n.inputs.begin() + std::min(n.inputs.size(), own_inputs(n)));
  u.attrs.erase(kStagesAttr);
  for (Stage s : unit_stages(n)) {
    if (std::find(keep.begin(), keep.end(), s) == keep.end()) continue;
    std::vector<std::string> values;
    for (size_t i = 0; i < spec(s).inputs; ++i) values.push_back(stage_value(n, s, i));
    add_stage(u, s, values);
  }
  return u;
}

}  // namespace optim
