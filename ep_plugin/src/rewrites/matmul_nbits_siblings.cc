// Weight-only projections of one input as one MatMulNBitsGroup node (ops/matmul_nbits.cc): the MatMulNBits nodes
// that read the same A with int8 activations (accuracy_level 4, 4-bit codes) and the same K and block size -- a
// decoder layer's query, key and value projections, its gate and up projections. A decode step then quantizes A
// once per group and shares one round of pool tasks among them, as a model builder's fused qkv / gate-up weights
// would, without changing the file.
#include <map>
#include <tuple>

#include "../graph_matcher.h"
#include "rewrite.h"

namespace optim {
namespace {

bool int8_activation_nbits(const Node& n) {
  return n.op == "MatMulNBits" && n.domain == "com.microsoft" && n.attr_i("accuracy_level", 0) == 4 &&
         n.attr_i("bits", 4) == 4 && n.attr_i("block_size", 0) % 32 == 0 && n.attr_i("block_size", 0) > 0 &&
         !n.has_input(4) && n.outputs.size() == 1;
}

}  // namespace

size_t group_matmul_nbits_siblings(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  // (A, K, block size) -> the nodes, in graph order.
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<size_t>> siblings;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (int8_activation_nbits(n)) siblings[{n.inputs[0], n.attr_i("K", 0), n.attr_i("block_size", 0)}].push_back(i);
  }
  std::vector<Node> added;
  for (const auto& [key, members] : siblings) {
    if (members.size() < 2) continue;
    const Node& first = g.nodes[members[0]];
    Node group;
    group.name = first.name;
    group.op = "MatMulNBitsGroup";
    group.domain = kInternalDomain;
    group.since_version = 1;
    group.attrs = first.attrs;
    group.attrs.erase("N");
    group.inputs = {first.inputs[0]};
    std::vector<int64_t> ns;
    Attr names;
    names.type = ORT_OP_ATTR_STRINGS;
    for (size_t i : members) {
      const Node& n = g.nodes[i];
      for (size_t input : {1, 2, 3, 5}) group.inputs.push_back(n.has_input(input) ? n.inputs[input] : "");
      group.outputs.push_back(n.outputs[0]);
      ns.push_back(n.attr_i("N", 0));
      names.strings.push_back(n.name);
      if (i != members[0]) note_fused_after(group, label_with_fused(n));
      m.kill(&n);
    }
    group.set_attr_ints("Ns", ns);
    group.attrs["part_names"] = names;
    added.push_back(std::move(group));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
