// ScatterND without a reduction: the data with the slices `indices` name replaced by `updates`' rows. A KV cache
// kept at a fixed capacity (llm/cache_layout.py) is updated by one: its output and its data are one buffer (the
// caller binds both to one array), so the data is not copied onto itself and a step writes only its new rows.
#include <cstring>

#include "op.h"

namespace optim {
namespace {

class ScatterND : public Op {
 public:
  explicit ScatterND(std::string label) : label_(std::move(label)) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape &data = *in[0], &idx = *in[1], &upd = *in[2];
    if (idx.empty() || idx.back() < 1 || idx.back() > static_cast<int64_t>(data.size()))
      throw Error(label_ + ": indices " + shape_str(idx) + " do not index data " + shape_str(data));
    Shape want(idx.begin(), idx.end() - 1);
    want.insert(want.end(), data.begin() + idx.back(), data.end());
    if (upd != want)
      throw Error(label_ + ": updates " + shape_str(upd) + " are not " + shape_str(want) + " (indices " +
                  shape_str(idx) + " into data " + shape_str(data) + ")");
    return {data};
  }

  int in_place_input() const override { return 0; }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &data = *in[0].shape, &idx = *in[1].shape;
    const size_t elem = dtype_size(in[0].dtype);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    const int64_t total = in[0].numel() * static_cast<int64_t>(elem);
    if (dst != src)
      parallel_chunks(rc, total, [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, static_cast<size_t>(e - b)); });
    const size_t k = static_cast<size_t>(idx.back());
    int64_t slice = 1;
    for (size_t d = k; d < data.size(); ++d) slice *= data[d];
    const size_t slice_bytes = static_cast<size_t>(slice) * elem;
    const int64_t count = in[1].numel() / static_cast<int64_t>(k);
    const auto* indices = in[1].as<int64_t>();
    const auto* upd = static_cast<const uint8_t*>(in[2].data);
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = 0;
      for (size_t d = 0; d < k; ++d) {
        int64_t j = indices[i * static_cast<int64_t>(k) + static_cast<int64_t>(d)];
        if (j < 0) j += data[d];
        if (j < 0 || j >= data[d])
          throw Error(label_ + ": index " + std::to_string(indices[i * static_cast<int64_t>(k) + static_cast<int64_t>(d)]) +
                      " is outside dimension " + std::to_string(d) + " of data " + shape_str(data));
        at = at * data[d] + j;
      }
      std::memcpy(dst + static_cast<size_t>(at) * slice_bytes, upd + static_cast<size_t>(i) * slice_bytes, slice_bytes);
    }
  }

 private:
  std::string label_;
};

std::string check_scatter_nd(const Node& n, const Graph& g) {
  const std::string reduction = n.attr_s("reduction", "none");
  if (reduction != "none") return "ScatterND with reduction '" + reduction + "' (only 'none' runs here)";
  const ValueInfo* idx = g.value(n.inputs[1]);
  if (idx && idx->dtype != DType::kInt64) return "indices '" + n.inputs[1] + "' are not int64";
  const ValueInfo *data = g.value(n.inputs[0]), *upd = g.value(n.inputs[2]);
  if (data && upd && data->dtype != upd->dtype) return "updates and data differ in type";
  return require_fixed_size(g, n, 0);
}

std::unique_ptr<Op> create_scatter_nd(const Node& n, const Graph&) { return std::make_unique<ScatterND>(n.label()); }

}  // namespace

std::vector<OpDef> scatter_nd_op_defs() { return {{"ScatterND", 11, 18, check_scatter_nd, create_scatter_nd}}; }

}  // namespace optim
