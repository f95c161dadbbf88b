// Chooses what OptimEP claims: maximal connected, convex groups of supported nodes (each group
// becomes one fused node), and the reason for every node it leaves to other EPs.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace optim {

struct Refusal {
  std::string node;
  std::string op;
  std::string reason;
};

struct Partition {
  std::vector<std::vector<size_t>> groups;  // node indices into Graph::nodes, topological order
  std::vector<Refusal> refused;
};

// min_group_nodes: groups smaller than this are left to the CPU EP (fused nodes have a fixed cost).
Partition partition_graph(const Graph& g, size_t min_group_nodes);

}  // namespace optim
