// The integer inputs that decide an op's output shape (Slice's starts, Pad's pads, Tile's repeats, Split's
// sizes, ConstantOfShape's shape): what may be claimed, their values at shape inference, and at run time.
#pragma once

#include <vector>

#include "op.h"

namespace optim {

// "" when input `index` is absent, int64, or an int32 constant; else the reason. The plan reads a shape
// input that arrives at run time only as int64 (or float32), so a computed int32 one stays on the CPU EP.
std::string require_index_input(const Graph& g, const Node& n, size_t index, const char* what);

// The values of input `index` from the plan's ShapeValues: nullptr when the input is omitted; throws when
// it is present but its values are not available.
const std::vector<int64_t>* index_values(const std::vector<const Shape*>& in, const ShapeValues& values, size_t index,
                                         const char* what);

// The elements of an int32 or int64 tensor at run time, as int64.
std::vector<int64_t> int_values(const TensorRef& t);

// "[2,-1,3]" for messages (shape_str would print -1 as an unknown dim).
std::string values_str(const std::vector<int64_t>& v);

// Whether the node's own outputs reach, through any chain of nodes, an input that decides a claimed op's
// output shape: "" if not, else the reason (naming that op). Ops that only produce shapes or sizes (Shape,
// Size) stay with the CPU EP then, so the partitions that read their data are not split around them.
std::string feeds_a_shape(const Node& n, const Graph& g);

}  // namespace optim
