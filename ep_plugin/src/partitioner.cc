#include "partitioner.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/op.h"

namespace optim {
namespace {

// If/Loop/Scan stay with ONNX Runtime: its control-flow kernels run the subgraphs, and it offers each
// subgraph's nodes to OptimEP in a GetCapability call of their own (outer-scope values arrive as inputs).
bool is_control_flow(const Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx") && (n.op == "If" || n.op == "Loop" || n.op == "Scan");
}

}  // namespace

// Nodes are visited in topological order. A supported node joins the groups of its supported
// producers, merging them, except a group from which some path reaches the node through a node
// outside the group: fusing across that path would create a cycle between the fused node and the
// outside node. `left[n]` holds the groups that some path into n has already left. Merging is safe:
// if a path ran from group A through an outside node into group B, every node downstream of B
// (the current node included) would have A in its `left` set, so A would not be a candidate.
Partition partition_graph(const Graph& g, size_t min_group_nodes) {
  Partition p;
  const size_t n_nodes = g.nodes.size();
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < n_nodes; ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;

  std::vector<std::string> reason(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i)
    reason[i] = is_control_flow(g.nodes[i])
                    ? "control flow stays with ONNX Runtime's CPU EP, which runs the " + g.nodes[i].op +
                          "'s subgraph(s); their nodes are offered to OptimEP separately"
                    : why_unsupported(g.nodes[i], g);
  // A plan computes its shapes before it runs: a value that decides a claimed node's output shape must
  // come from outside the partition (a graph input, a constant, or the CPU EP), never from a step of it.
  for (size_t i = 0; i < n_nodes; ++i) {
    if (!reason[i].empty()) continue;
    for (size_t idx : shape_value_inputs(g.nodes[i])) {
      if (!g.nodes[i].has_input(idx)) continue;
      auto it = producer.find(g.nodes[i].inputs[idx]);
      if (it == producer.end() || !reason[it->second].empty()) continue;
      reason[it->second] = "its output '" + g.nodes[i].inputs[idx] + "' decides the shape of " + g.nodes[i].label() +
                           ", so it is computed before OptimEP's plan runs (by the CPU EP)";
    }
  }

  std::vector<int> parent;  // union-find over group ids
  auto find = [&](int c) {
    while (parent[static_cast<size_t>(c)] != c) c = parent[static_cast<size_t>(c)] = parent[static_cast<size_t>(parent[static_cast<size_t>(c)])];
    return c;
  };
  std::vector<int> group(n_nodes, -1);
  std::vector<std::set<int>> left(n_nodes);
  for (size_t i : topo_order(g)) {
    const Node& node = g.nodes[i];
    std::set<int> left_before, candidates;
    // A control-flow node depends on what its subgraphs read from this graph (implicit inputs) too:
    // missing those edges would fuse a producer of such a value with a reader of the node's outputs.
    for (const auto* names : {&node.inputs, &node.implicit_inputs})
      for (const auto& in : *names) {
        auto it = producer.find(in);
        if (in.empty() || it == producer.end()) continue;
        const size_t pi = it->second;
        for (int c : left[pi]) left_before.insert(find(c));
        if (group[pi] >= 0) candidates.insert(find(group[pi]));
      }
    int chosen = -1;
    if (reason[i].empty()) {
      for (int c : candidates) {
        if (left_before.count(c)) continue;
        if (chosen < 0) {
          chosen = c;
        } else {
          parent[static_cast<size_t>(c)] = chosen;  // both feed this node with no outside path between: one group
        }
      }
      if (chosen < 0) {
        chosen = static_cast<int>(parent.size());
        parent.push_back(chosen);
      }
      group[i] = chosen;
    }
    // Every producer group other than n's own is left behind on paths through n.
    left[i] = std::move(left_before);
    for (int c : candidates)
      if (chosen < 0 || find(c) != find(chosen)) left[i].insert(find(c));
  }

  std::map<int, std::vector<size_t>> by_root;
  for (size_t i = 0; i < n_nodes; ++i)
    if (group[i] >= 0) by_root[find(group[i])].push_back(i);
  std::vector<std::vector<size_t>> groups;
  for (auto& [root, members] : by_root) groups.push_back(std::move(members));
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
