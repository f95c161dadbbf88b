#include "partitioner.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/op.h"

namespace optim {

// Nodes are visited in topological order. A supported node joins the group of one of its supported
// producers unless a path from that group reaches the node through a node outside the group (then
// fusing would create a cycle between the fused node and the outside node). `left[n]` holds the
// groups that some path into n has already left: n can never join those.
Partition partition_graph(const Graph& g, size_t min_group_nodes) {
  Partition p;
  const size_t n_nodes = g.nodes.size();
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < n_nodes; ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;

  std::vector<std::string> reason(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) reason[i] = why_unsupported(g.nodes[i], g);

  std::vector<int> group(n_nodes, -1);
  std::vector<std::set<int>> left(n_nodes);
  std::vector<std::vector<size_t>> groups;
  for (size_t i : topo_order(g)) {
    const Node& node = g.nodes[i];
    std::set<int> left_before;
    std::vector<int> candidates;
    for (const auto& in : node.inputs) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      const size_t pi = it->second;
      left_before.insert(left[pi].begin(), left[pi].end());
      if (group[pi] >= 0) candidates.push_back(group[pi]);
    }
    int chosen = -1;
    if (reason[i].empty()) {
      for (int c : candidates) {
        if (left_before.count(c)) continue;
        if (chosen < 0 || groups[static_cast<size_t>(c)].size() > groups[static_cast<size_t>(chosen)].size()) chosen = c;
      }
      if (chosen < 0) {
        chosen = static_cast<int>(groups.size());
        groups.emplace_back();
      }
      group[i] = chosen;
      groups[static_cast<size_t>(chosen)].push_back(i);
    }
    // Every producer group other than n's own is left behind on paths through n.
    left[i] = std::move(left_before);
    for (int c : candidates)
      if (c != chosen) left[i].insert(c);
  }

  for (auto& members : groups) {
    if (members.size() >= min_group_nodes) {
      p.groups.push_back(members);
      continue;
    }
    for (size_t i : members)
      reason[i] = "its connected group of " + std::to_string(members.size()) + " supported node(s) is below min_partition_nodes=" +
                  std::to_string(min_group_nodes);
  }
  std::vector<bool> claimed(n_nodes, false);
  for (const auto& members : p.groups)
    for (size_t i : members) claimed[i] = true;
  for (size_t i = 0; i < n_nodes; ++i)
    if (!claimed[i]) p.refused.push_back({g.nodes[i].name, g.nodes[i].op, reason[i]});
  return p;
}

}  // namespace optim
