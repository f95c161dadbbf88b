// Attention over a key / value cache as exporters write it for decoders, as one GroupAttention node
// (ops/group_attention.cc):
//   MatMul(Softmax(MatMul(Q, Transpose(K', perm 0,1,3,2)) [* or / scalar] [+ mask]), V')
// where K' and V' are the caches themselves (each head its own: K a Concat, the cache's update) or the caches with
// each head repeated for a group of query heads (grouped-query attention: Reshape(Expand(Unsqueeze(cache, axis 2)))).
// Each step of a decode then reads the cache once where it lies, instead of copying it (Expand, Transpose) and
// running one-row GEMMs. A cache kept at a fixed capacity (llm/cache_layout.py: ScatterND writes the new rows into
// the [B, Hkv, capacity, D] buffer, Slice(0, length) on axis 2 cuts what the attention reads) is read in its
// buffer, the Slice taken into the step (its end becomes the step's length input). Encoders' attention (K a
// Transpose of the projection, not a cache) stays on the GEMM path.
#include "../graph_matcher.h"
#include "rewrite.h"

namespace optim {
namespace {

constexpr const char* kName = "group_attention";
constexpr size_t kMaxInputs = 9;  // Q, K, V, mask, K's Expand and Reshape shapes, V's, the cache length

// Where a key or value operand comes from: the cache, the head-repeat nodes (null when none) and the Slice of a
// fixed-capacity cache (null when the cache is all positions).
struct CacheSource {
  std::string cache;
  const Node* unsqueeze = nullptr;
  const Node* expand = nullptr;
  const Node* reshape = nullptr;
  const Node* slice = nullptr;
};

// `cache`, read by `reader` alone, as Slice(buffer, starts [0], ends, axes [2], steps [1]) of a ScatterND's output:
// the valid positions of a fixed-capacity cache.
const Node* capacity_cache(const Graph& g, const Matcher& m, const std::string& cache, const Node* reader) {
  const Node* slice = m.produced_by(cache, "Slice");
  if (!slice || slice->since_version < 10 || m.sole_reader(cache) != reader || slice->inputs.size() < 4) return nullptr;
  const std::vector<int64_t> axes = int64_constant(g, slice->inputs[3]);
  const bool one_step = slice->inputs.size() < 5 || slice->inputs[4].empty() ||
                        int64_constant(g, slice->inputs[4]) == std::vector<int64_t>{1};
  if (int64_constant(g, slice->inputs[1]) != std::vector<int64_t>{0} || !one_step ||
      (axes != std::vector<int64_t>{2} && axes != std::vector<int64_t>{-2}))
    return nullptr;
  return is_onnx_op(m.producer(slice->inputs[0]), "ScatterND") ? slice : nullptr;
}

// `value` as Reshape(Expand(Unsqueeze(cache, [2]))), each read only by the next (the Reshape by `reader` alone);
// else `value` itself as the cache when a Concat makes it (a cache's update); else why not.
std::string find_cache(const Graph& g, const Matcher& m, const std::string& value, const Node* reader,
                       CacheSource* src) {
  const Node* reshape = m.produced_by(value, "Reshape");
  const Node* expand = reshape ? m.produced_by(reshape->inputs[0], "Expand") : nullptr;
  const Node* unsqueeze = expand ? m.produced_by(expand->inputs[0], "Unsqueeze") : nullptr;
  if (unsqueeze && m.sole_reader(unsqueeze->outputs[0]) == expand && m.sole_reader(expand->outputs[0]) == reshape &&
      m.sole_reader(value) == reader) {
    const std::vector<int64_t> axes = unsqueeze->since_version >= 13 ? int64_constant(g, unsqueeze->inputs.size() > 1 ? unsqueeze->inputs[1] : "")
                                                                     : unsqueeze->attr_ints("axes");
    if (axes != std::vector<int64_t>{2}) return "the head repeat unsqueezes another axis than 2";
    *src = {unsqueeze->inputs[0], unsqueeze, expand, reshape, nullptr};
    if ((src->slice = capacity_cache(g, m, src->cache, unsqueeze))) src->cache = src->slice->inputs[0];
    return "";
  }
  if ((src->slice = capacity_cache(g, m, value, reader))) {
    src->cache = src->slice->inputs[0];
    return "";
  }
  const Node* maker = m.producer(value);
  if (!is_onnx_op(maker, "Concat")) return "'" + value + "' is neither a key / value cache (a Concat) nor its heads repeated";
  src->cache = value;
  return "";
}

}  // namespace

size_t fuse_group_attention(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  std::vector<Node> added;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& softmax = g.nodes[i];
    if (m.dead().count(i) || !is_onnx_op(&softmax, "Softmax") || softmax.since_version < 13) continue;
    if (softmax.attr_i("axis", -1) != -1) continue;
    const Node* pv = m.sole_reader(softmax.outputs[0]);
    if (!is_onnx_op(pv, "MatMul") || pv->inputs[0] != softmax.outputs[0]) continue;
    // Back from the Softmax: an optional mask Add, an optional scale, the scores' MatMul.
    std::string scores = softmax.inputs[0], mask;
    const Node* add = m.produced_by(scores, "Add");
    if (add) {
      if (m.sole_reader(add->outputs[0]) != &softmax) continue;
      const bool first = m.producer(add->inputs[0]) && (is_onnx_op(m.producer(add->inputs[0]), "Mul") ||
                                                        is_onnx_op(m.producer(add->inputs[0]), "Div") ||
                                                        is_onnx_op(m.producer(add->inputs[0]), "MatMul"));
      scores = add->inputs[first ? 0 : 1];
      mask = add->inputs[first ? 1 : 0];
      if (!has_dtype(g, mask, DType::kFloat32)) continue;
    }
    // The scale: a Mul by a float constant (either side) or a Div by one.
    float scale = 1.f, c = 0.f;
    const Node* scaling = m.produced_by(scores, "Mul");
    if (!scaling) scaling = m.produced_by(scores, "Div");
    if (scaling) {
      int data = -1;
      if (scaling->op == "Mul" && float_scalar_constant(g, scaling->inputs[1], &c)) data = 0, scale = c;
      else if (scaling->op == "Mul" && float_scalar_constant(g, scaling->inputs[0], &c)) data = 1, scale = c;
      else if (scaling->op == "Div" && float_scalar_constant(g, scaling->inputs[1], &c) && c != 0.f) data = 0, scale = 1.f / c;
      if (data < 0 || m.sole_reader(scaling->outputs[0]) != (add ? add : &softmax)) continue;
      scores = scaling->inputs[static_cast<size_t>(data)];
    }
    const Node* qk = m.produced_by(scores, "MatMul");
    if (!qk || m.sole_reader(qk->outputs[0]) != (scaling ? scaling : add ? add : &softmax)) continue;
    const Node* transpose = m.produced_by(qk->inputs[1], "Transpose");
    if (!transpose || m.sole_reader(transpose->outputs[0]) != qk ||
        transpose->attr_ints("perm") != std::vector<int64_t>{0, 1, 3, 2}) {
      continue;
    }
    if (!has_dtype(g, qk->inputs[0], DType::kFloat32)) continue;
    CacheSource keys, values;
    std::string why = find_cache(g, m, transpose->inputs[0], transpose, &keys);
    if (why.empty()) why = find_cache(g, m, pv->inputs[1], pv, &values);
    if (why.empty() && (keys.expand == nullptr) != (values.expand == nullptr))
      why = "one of K and V has its heads repeated, the other not";
    if (why.empty() && (keys.slice == nullptr) != (values.slice == nullptr))
      why = "one of K and V is a fixed-capacity cache, the other not";
    if (why.empty() && keys.slice && keys.slice->inputs[2] != values.slice->inputs[2])
      why = "K and V are cut to different lengths";
    if (!why.empty()) {
      ctx.refuse(kName, *pv, why);
      continue;
    }
    Node fused;
    fused.name = pv->name;
    fused.op = "GroupAttention";
    fused.domain = kInternalDomain;
    fused.since_version = 1;
    fused.inputs = {qk->inputs[0], keys.cache, values.cache, mask};
    fused.inputs.resize(kMaxInputs);
    if (keys.expand) {
      fused.inputs[4] = keys.expand->inputs[1];
      fused.inputs[5] = keys.reshape->inputs[1];
      fused.inputs[6] = values.expand->inputs[1];
      fused.inputs[7] = values.reshape->inputs[1];
    }
    if (keys.slice) fused.inputs[8] = keys.slice->inputs[2];  // the length: the Slice's end
    while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
    fused.outputs = pv->outputs;
    fused.set_attr_f("scale", scale);
    if (keys.reshape) fused.set_attr_i("k_allowzero", keys.reshape->attr_i("allowzero", 0));
    if (values.reshape) fused.set_attr_i("v_allowzero", values.reshape->attr_i("allowzero", 0));
    note_fused_before(fused, label_with_fused(*qk) + " + Softmax");
    for (const Node* n : {qk, transpose, scaling, add, &softmax, pv, keys.unsqueeze, keys.expand, keys.reshape,
                          values.unsqueeze, values.expand, values.reshape, keys.slice, values.slice})
      if (n) m.kill(n);
    added.push_back(std::move(fused));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
