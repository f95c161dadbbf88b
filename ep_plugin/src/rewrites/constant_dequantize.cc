// Each DequantizeLinear of constants (weights and biases left in float units) replaced by its float result,
// computed once here instead of on every run.
#include "rewrite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "../graph_matcher.h"
#include "../ops/qgemm.h"
#include "qdq_checks.h"

namespace optim {

size_t fold_constant_dequantize(Graph& g, RewriteContext& ctx) {
  const std::set<std::string> keep(ctx.outputs.begin(), ctx.outputs.end());
  size_t folded = 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    const bool dq = n.op == "DequantizeLinear" && (n.domain.empty() || n.domain == "ai.onnx");
    const Tensor* q = dq ? g.constant(n.inputs[0]) : nullptr;
    const Tensor* s = dq ? g.constant(n.inputs[1]) : nullptr;
    const Tensor* z = dq && n.has_input(2) ? g.constant(n.inputs[2]) : nullptr;
    const bool foldable = q && s && (!n.has_input(2) || z) && !keep.count(n.outputs[0]) && s->dtype == DType::kFloat32 &&
                          (q->dtype == DType::kInt8 || q->dtype == DType::kUint8 || q->dtype == DType::kInt32) &&
                          (!z || z->dtype == q->dtype) && n.attr_i("block_size", 0) == 0;
    if (!foldable) {
      kept.push_back(std::move(n));
      continue;
    }
    // Per tensor, or per channel along `axis` (scale of that axis' length).
    int64_t channels = 1, inner = 1;
    if (s->numel() != 1) {
      int64_t axis = n.attr_i("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(q->shape.size());
      if (axis < 0 || axis >= static_cast<int64_t>(q->shape.size()) || q->shape[static_cast<size_t>(axis)] != s->numel()) {
        kept.push_back(std::move(n));
        continue;
      }
      channels = s->numel();
      for (size_t d = static_cast<size_t>(axis) + 1; d < q->shape.size(); ++d) inner *= q->shape[d];
    }
    Tensor out;
    out.dtype = DType::kFloat32;
    out.shape = q->shape;
    out.bytes.resize(static_cast<size_t>(q->numel()) * sizeof(float));
    float* o = reinterpret_cast<float*>(out.bytes.data());
    auto at = [](const Tensor& t, int64_t i) -> int64_t {
      if (t.dtype == DType::kUint8) return t.data<uint8_t>()[i];
      if (t.dtype == DType::kInt8) return t.data<int8_t>()[i];
      return t.data<int32_t>()[i];
    };
    for (int64_t i = 0; i < q->numel(); ++i) {
      const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
      o[i] = static_cast<float>(at(*q, i) - (z ? at(*z, c) : 0)) * s->data<float>()[c];
    }
    g.constants[n.outputs[0]] = std::move(out);
    if (ValueInfo* vi = &g.values[n.outputs[0]]) vi->is_constant = true;
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace optim
