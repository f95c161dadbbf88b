// Gather (embedding lookups and index picks), Expand and Concat, on any fixed-size element type.
#include <cstring>

#include "broadcast.h"
#include "broadcast_runs.h"

namespace optim {
namespace {

// The element counts before and after dimension `axis` of a shape.
struct AroundAxis {
  int64_t outer = 1, inner = 1;
  AroundAxis(const Shape& s, size_t axis) {
    for (size_t d = 0; d < axis; ++d) outer *= s[d];
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  }
};

class GatherImpl : public Op {
 public:
  explicit GatherImpl(int64_t axis) : axis_(axis) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& d = *in[0];
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(d.size()), "Gather axis"));
    Shape out(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(axis));
    out.insert(out.end(), in[1]->begin(), in[1]->end());
    out.insert(out.end(), d.begin() + static_cast<std::ptrdiff_t>(axis) + 1, d.end());
    return {out};
  }
  void run(const RunContext&, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& d = *in[0].shape;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(d.size()), "Gather axis"));
    const auto [outer, inner] = AroundAxis(d, axis);
    const int64_t dim = d[axis], n_idx = in[1].numel();
    const size_t block = static_cast<size_t>(inner) * dtype_size(in[0].dtype);
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    for (int64_t j = 0; j < n_idx; ++j) {
      int64_t k = in[1].dtype == DType::kInt32 ? in[1].as<int32_t>()[j] : in[1].as<int64_t>()[j];
      if (k < -dim || k >= dim)
        throw Error("index " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(dim));
      if (k < 0) k += dim;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o * n_idx + j) * block, src + static_cast<size_t>(o * dim + k) * block, block);
    }
  }

 private:
  int64_t axis_;
};

// Expand(input, shape): input broadcast to broadcast(input.shape, shape).
class ExpandImpl : public Op {
 public:
  std::vector<Shape> infer(const std::vector<const Shape*>&) const override {
    throw Error("Expand needs the values of its shape input");
  }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    if (values.size() < 2 || !values[1]) throw Error("the values of Expand's shape input are not available");
    const Shape target(values[1]->begin(), values[1]->end());
    for (int64_t v : target)
      if (v < 0) throw Error("Expand shape " + shape_str(target) + " has a negative dimension");
    return {broadcast_shapes(*in[0], target)};
  }
  // In runs (broadcast_runs.h, the output as the second operand gives each row's offset): a run the input
  // advances through is one memcpy (a grouped-query attention's repeated keys and values), else one value repeated.
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const size_t size = dtype_size(in[0].dtype);
    const BroadcastRuns runs(*out[0].shape, *in[0].shape, *out[0].shape);
    const auto* src = static_cast<const uint8_t*>(in[0].data);
    auto* dst = static_cast<uint8_t*>(out[0].data);
    const int64_t len = runs.len();
    runs.parallel(rc, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        int64_t ia = 0, io = 0;
        runs.offsets(row, &ia, &io);
        uint8_t* to = dst + io * static_cast<int64_t>(size);
        if (runs.a_step) {
          std::memcpy(to, src + ia * static_cast<int64_t>(size), static_cast<size_t>(len) * size);
        } else {
          for (int64_t i = 0; i < len; ++i) copy_element(src, ia, to, i, size);
        }
      }
    });
  }
};

// Concat along one axis: per outer index, each input's contiguous block in turn.
class ConcatImpl : public Op {
 public:
  explicit ConcatImpl(int64_t axis) : axis_(axis) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape* first = nullptr;
    for (const Shape* s : in)
      if (s) { first = s; break; }
    if (!first) throw Error("Concat has no inputs");
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(first->size()), "Concat axis"));
    Shape out = *first;
    out[axis] = 0;
    for (const Shape* s : in) {
      if (!s) continue;
      bool fits = s->size() == first->size();
      for (size_t d = 0; fits && d < s->size(); ++d) fits = d == axis || (*s)[d] == (*first)[d];
      if (!fits) throw Error("inputs " + shape_str(*first) + " and " + shape_str(*s) + " differ outside axis " + std::to_string(axis));
      out[axis] += (*s)[axis];
    }
    return {out};
  }
  // The output's bytes are cut into chunks shared out over the pool (a decoder's concatenation of feature
  // maps moves tens of megabytes); each chunk copies the runs of the inputs' blocks it covers.
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& os = *out[0].shape;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(os.size()), "Concat axis"));
    const auto [outer, inner] = AroundAxis(os, axis);
    const size_t elem = dtype_size(out[0].dtype);
    const size_t out_row = static_cast<size_t>(os[axis] * inner) * elem;
    if (out_row == 0 || outer == 0) return;
    std::vector<const uint8_t*> src;
    std::vector<size_t> start, block;  // per present input: where its bytes begin in an output row, and how many
    size_t at = 0;
    for (const TensorRef& t : in) {
      if (!t.present()) continue;
      src.push_back(static_cast<const uint8_t*>(t.data));
      start.push_back(at);
      block.push_back(static_cast<size_t>((*t.shape)[axis] * inner) * elem);
      at += block.back();
    }
    auto* dst = static_cast<uint8_t*>(out[0].data);
    parallel_chunks(rc, static_cast<int64_t>(static_cast<size_t>(outer) * out_row), [&](int64_t b, int64_t e) {
      for (size_t pos = static_cast<size_t>(b), end = static_cast<size_t>(e); pos < end;) {
        const size_t row = pos / out_row, r = pos % out_row;
        size_t i = 0;
        while (r >= start[i] + block[i]) ++i;  // the input whose block holds byte r of the row (empty ones skipped)
        const size_t len = std::min(end - pos, start[i] + block[i] - r);
        std::memcpy(dst + pos, src[i] + row * block[i] + (r - start[i]), len);
        pos += len;
      }
    });
  }

 private:
  int64_t axis_;
};

std::string check_concat(const Node& n, const Graph& g) {
  if (!n.has_attr("axis")) return "Concat without an axis attribute";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    std::string r = require_fixed_size(g, n, i);
    if (!r.empty()) return r;
  }
  return "";
}

std::string check_gather(const Node& n, const Graph& g) { return require_indices_and_data(g, n); }

std::string check_expand(const Node& n, const Graph& g) {
  const ValueInfo* s = g.value(n.inputs[1]);
  if (s && s->dtype != DType::kInt64) return "Expand shape '" + n.inputs[1] + "' is not int64";
  return require_fixed_size(g, n, 0);
}

std::vector<size_t> expand_shape_input(const Node&) { return {1}; }

std::unique_ptr<Op> create_gather(const Node& n, const Graph&) { return std::make_unique<GatherImpl>(n.attr_i("axis", 0)); }
std::unique_ptr<Op> create_expand(const Node&, const Graph&) { return std::make_unique<ExpandImpl>(); }
std::unique_ptr<Op> create_concat(const Node& n, const Graph&) { return std::make_unique<ConcatImpl>(n.attr_i("axis", 0)); }

}  // namespace

std::vector<OpDef> indexing_op_defs() {
  return {
      {"Gather", 1, 13, check_gather, create_gather},
      {"Expand", 8, 13, check_expand, create_expand, expand_shape_input},
      {"Concat", 4, 13, check_concat, create_concat},
  };
}

}  // namespace optim
