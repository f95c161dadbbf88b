// GatherElements and GatherND (attention masks and token-type picks in exported transformers), on any
// fixed-size element type with int64 or int32 indices. Indices out of range are run-time errors naming
// the index and the dimension, as ONNX Runtime's own kernels report them.
#include <cstring>

#include "op.h"

namespace optim {
namespace {

int64_t index_at(const TensorRef& t, int64_t i) {
  return t.dtype == DType::kInt32 ? t.as<int32_t>()[i] : t.as<int64_t>()[i];
}

// An index into a dimension of size dim, negative ones counted from its end.
int64_t checked_index(int64_t k, int64_t dim, size_t axis) {
  if (k < -dim || k >= dim)
    throw Error("index " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " +
                std::to_string(dim));
  return k < 0 ? k + dim : k;
}

// Row-major element strides of a shape.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// out[p] = data[p with its `axis` coordinate replaced by indices[p]]; out has the indices' shape.
class GatherElementsImpl : public Op {
 public:
  explicit GatherElementsImpl(int64_t axis) : axis_(axis) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape &d = *in[0], &idx = *in[1];
    if (d.size() != idx.size() || d.empty())
      throw Error("indices " + shape_str(idx) + " and data " + shape_str(d) + " need the same rank, at least 1");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(d.size()), "GatherElements axis"));
    for (size_t k = 0; k < d.size(); ++k)
      if (k != axis && idx[k] > d[k])
        throw Error("indices " + shape_str(idx) + " are larger than data " + shape_str(d) + " on axis " + std::to_string(k));
    return {idx};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &d = *in[0].shape, &idx = *in[1].shape;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(d.size()), "GatherElements axis"));
    const std::vector<int64_t> stride = strides_of(d);
    const size_t elem = dtype_size(in[0].dtype), rank = idx.size();
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    std::vector<int64_t> at(rank, 0);  // the output position, counted up like an odometer
    const int64_t n = shape_numel(idx);
    for (int64_t o = 0; o < n; ++o) {
      int64_t s = 0;
      for (size_t k = 0; k < rank; ++k)
        s += (k == axis ? checked_index(index_at(in[1], o), d[axis], axis) : at[k]) * stride[k];
      std::memcpy(dst + static_cast<size_t>(o) * elem, src + static_cast<size_t>(s) * elem, elem);
      for (size_t k = rank; k-- > 0;) {
        if (++at[k] < idx[k]) break;
        at[k] = 0;
      }
    }
  }

 private:
  int64_t axis_;
};

// indices [b..., t..., k] pick, per batch, slices data[b..., i_1..i_k, rest...]:
// out = indices.shape[:-1] + data.shape[batch_dims + k:].
class GatherNDImpl : public Op {
 public:
  explicit GatherNDImpl(int64_t batch_dims) : batch_dims_(static_cast<size_t>(batch_dims)) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape &d = *in[0], &idx = *in[1];
    const size_t b = batch_dims_;
    if (idx.empty() || d.size() <= b || idx.size() <= b)
      throw Error("data " + shape_str(d) + " and indices " + shape_str(idx) + " need more dims than batch_dims " + std::to_string(b));
    const int64_t k = idx.back();
    if (k < 1 || static_cast<size_t>(k) > d.size() - b)
      throw Error("indices " + shape_str(idx) + " index " + std::to_string(k) + " dims of data " + shape_str(d) +
                  " past its " + std::to_string(b) + " batch dims");
    for (size_t i = 0; i < b; ++i)
      if (d[i] != idx[i]) throw Error("batch dims of data " + shape_str(d) + " and indices " + shape_str(idx) + " differ");
    Shape out(idx.begin(), idx.end() - 1);
    out.insert(out.end(), d.begin() + static_cast<std::ptrdiff_t>(b) + k, d.end());
    return {out};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &d = *in[0].shape, &idx = *in[1].shape;
    const size_t b = batch_dims_, k = static_cast<size_t>(idx.back());
    const std::vector<int64_t> stride = strides_of(d);
    int64_t batches = 1, tuples = 1;
    for (size_t i = 0; i < b; ++i) batches *= d[i];
    for (size_t i = b; i + 1 < idx.size(); ++i) tuples *= idx[i];
    const int64_t batch_stride = b ? stride[b - 1] : shape_numel(d);
    const size_t slice = static_cast<size_t>(stride[b + k - 1]) * dtype_size(in[0].dtype);
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t row = (bi * tuples + t) * static_cast<int64_t>(k);
        int64_t s = bi * batch_stride;
        for (size_t j = 0; j < k; ++j) s += checked_index(index_at(in[1], row + static_cast<int64_t>(j)), d[b + j], b + j) * stride[b + j];
        std::memcpy(dst + static_cast<size_t>(bi * tuples + t) * slice, src + static_cast<size_t>(s) * dtype_size(in[0].dtype), slice);
      }
  }

 private:
  size_t batch_dims_;
};

std::string check_gather_elements(const Node& n, const Graph& g) { return require_indices_and_data(g, n); }

std::string check_gather_nd(const Node& n, const Graph& g) {
  if (n.attr_i("batch_dims", 0) < 0) return "GatherND with a negative batch_dims";
  return require_indices_and_data(g, n);
}

std::unique_ptr<Op> create_gather_elements(const Node& n, const Graph&) {
  return std::make_unique<GatherElementsImpl>(n.attr_i("axis", 0));
}
std::unique_ptr<Op> create_gather_nd(const Node& n, const Graph&) {
  return std::make_unique<GatherNDImpl>(n.attr_i("batch_dims", 0));
}

}  // namespace

std::vector<OpDef> gather_indexed_op_defs() {
  return {
      {"GatherElements", 11, 13, check_gather_elements, create_gather_elements},
      {"GatherND", 11, 13, check_gather_nd, create_gather_nd},
  };
}

}  // namespace optim
