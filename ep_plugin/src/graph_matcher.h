// What the graph rewrites inside a partition (qdq_units.cc, gelu.cc) share: who produces and
// who reads each value, which nodes are already rewritten away, and how to drop them at the end.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir.h"

namespace optim {

// Whether n is an ONNX op of that type (the default domain, under either of its names).
inline bool is_onnx_op(const Node* n, const char* op) {
  return n && n->op == op && (n->domain.empty() || n->domain == "ai.onnx");
}

class Matcher {
 public:
  Matcher(Graph& g, const std::vector<std::string>& outputs) : g_(g), keep_(outputs.begin(), outputs.end()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& o : g.nodes[i].outputs)
        if (!o.empty()) producer_[o] = i;
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) ++readers_[in];
    }
  }

  // The node producing `value` if it is `op`, else nullptr.
  const Node* produced_by(const std::string& value, const char* op) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || dead_.count(it->second)) return nullptr;
    const Node& n = g_.nodes[it->second];
    return is_onnx_op(&n, op) ? &n : nullptr;
  }
  // The live node producing `value` (any op, any domain), or nullptr.
  const Node* producer(const std::string& value) const {
    auto it = producer_.find(value);
    return it == producer_.end() || dead_.count(it->second) ? nullptr : &g_.nodes[it->second];
  }
  // The one node reading `value`, when exactly one does and the value leaves no partition.
  const Node* sole_reader(const std::string& value) const {
    if (keep_.count(value) || readers_.count(value) == 0 || readers_.at(value) != 1) return nullptr;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_.count(i)) continue;
      const auto& ins = g_.nodes[i].inputs;
      if (std::find(ins.begin(), ins.end(), value) != ins.end()) return &g_.nodes[i];
    }
    return nullptr;
  }
  // How many live nodes read `value` (a node reading it twice counts twice).
  int readers(const std::string& value) const {
    auto it = readers_.find(value);
    return it == readers_.end() ? 0 : it->second;
  }
  size_t index_of(const Node* n) const { return static_cast<size_t>(n - g_.nodes.data()); }
  void kill(const Node* n) {
    dead_.insert(index_of(n));
    for (const auto& in : n->inputs)
      if (!in.empty()) --readers_[in];
  }
  // Drops a node whose outputs nobody reads any more (a DequantizeLinear left without consumers).
  void kill_if_unread(const Node* n) {
    for (const auto& o : n->outputs)
      if (!o.empty() && (keep_.count(o) || readers_[o] > 0)) return;
    kill(n);
  }
  const std::set<size_t>& dead() const { return dead_; }
  // Points input `idx` of `n` at `value` instead, keeping the reader counts right.
  void rewire_input(Node& n, size_t idx, const std::string& value) {
    --readers_[n.inputs[idx]];
    n.inputs[idx] = value;
    ++readers_[value];
  }

 private:
  Graph& g_;
  std::set<std::string> keep_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, int> readers_;
  std::set<size_t> dead_;
};

// Replaces g's nodes by the live ones followed by `added` (the plan orders them topologically).
inline void commit_rewrites(Graph& g, const Matcher& m, std::vector<Node>& added) {
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!m.dead().count(i)) kept.push_back(std::move(g.nodes[i]));
  for (Node& n : added) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
}

// A folding rewrite's end: commits when it folded (killed) nodes, and returns how many places it folded.
inline size_t commit_folds(Graph& g, const Matcher& m, size_t folded) {
  std::vector<Node> none;
  if (folded) commit_rewrites(g, m, none);
  return folded;
}

// A rewrite's end: commits when it added nodes, and returns how many (the places it rewrote).
inline size_t commit_added(Graph& g, const Matcher& m, std::vector<Node>& added) {
  const size_t n = added.size();
  if (n) commit_rewrites(g, m, added);
  return n;
}

}  // namespace optim
