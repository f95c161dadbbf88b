// Split (opsets 2-18: sizes from the attribute, the input (13) or num_outputs (18), else equal parts) and
// Tile (repeats input), on any fixed-size element type: each a strided box copy per output.
#include <algorithm>

#include "index_inputs.h"
#include "strided_copy.h"

namespace optim {
namespace {

class SplitImpl : public Op {
 public:
  SplitImpl(int64_t axis, size_t outputs, std::vector<int64_t> attr_split, int64_t num_outputs, bool split_input)
      : axis_(axis), outputs_(outputs), attr_split_(std::move(attr_split)), num_outputs_(num_outputs), split_input_(split_input) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (split_input_ && in.size() > 1 && in[1]) throw Error("Split needs the values of its split input");
    return shapes(*in[0], attr_split_.empty() ? nullptr : &attr_split_);
  }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    if (!split_input_) return infer(in);
    return shapes(*in[0], index_values(in, values, 1, "split"));
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(xs.size()), "Split axis"));
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= xs[d];
    for (size_t d = axis + 1; d < xs.size(); ++d) inner *= xs[d];
    const bool from_input = split_input_ && in.size() > 1 && in[1].present();
    const std::vector<int64_t> split = from_input ? int_values(in[1]) : attr_split_;
    const std::vector<Shape> parts = shapes(xs, from_input || !split.empty() ? &split : nullptr);
    const size_t elem = dtype_size(in[0].dtype);
    const auto* x = static_cast<const uint8_t*>(in[0].data);
    int64_t at = 0;  // where the next part starts along the axis
    for (size_t i = 0; i < out.size() && i < parts.size(); ++i) {
      const int64_t part = parts[i][axis];
      if (out[i].data) {  // an omitted output's part is skipped
        StridedBox box;
        box.add_dim(outer, xs[axis] * inner, part * inner);
        box.add_dim(part * inner, 1, 1);
        copy_box(rc, x + at * inner * static_cast<int64_t>(elem), out[i].data, elem, box);
      }
      at += part;
    }
  }

 private:
  std::vector<Shape> shapes(const Shape& x, const std::vector<int64_t>* split) const {
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.size()), "Split axis"));
    const int64_t dim = x[axis];
    std::vector<int64_t> sizes;
    if (split) {
      sizes = *split;
      if (sizes.size() != outputs_)
        throw Error("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs_) + " outputs");
      int64_t sum = 0;
      for (int64_t s : sizes)
        if (s < 0 || __builtin_add_overflow(sum, s, &sum)) throw Error("split sizes " + values_str(sizes) + " are not valid");
      if (sum != dim)
        throw Error("split sizes add up to " + std::to_string(sum) + ", not dim " + std::to_string(axis) + " of input " + shape_str(x));
    } else if (num_outputs_ > 0) {  // opset 18: ceil(dim / n) each, the last part what remains (at least 1, as ORT requires)
      const int64_t n = num_outputs_, chunk = (dim + n - 1) / n;
      if (static_cast<size_t>(n) != outputs_) throw Error("num_outputs " + std::to_string(n) + " differs from the node's outputs");
      if (n > dim || chunk * (n - 1) >= dim)
        throw Error("input " + shape_str(x) + " cannot give " + std::to_string(n) + " parts along axis " + std::to_string(axis));
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::min(chunk, std::max<int64_t>(0, dim - chunk * i)));
    } else {
      const int64_t n = static_cast<int64_t>(outputs_);
      if (n == 0 || dim % n != 0)
        throw Error("dim " + std::to_string(axis) + " of input " + shape_str(x) + " does not split into " + std::to_string(n) +
                    " equal parts");
      sizes.assign(outputs_, dim / n);
    }
    std::vector<Shape> out;
    for (int64_t s : sizes) {
      Shape o = x;
      o[axis] = s;
      out.push_back(o);
    }
    return out;
  }

  int64_t axis_;
  size_t outputs_;
  std::vector<int64_t> attr_split_;
  int64_t num_outputs_;
  bool split_input_;
};

class TileImpl : public Op {
 public:
  // Without values (which the plan always gives) index_values says what is missing.
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return infer(in, ShapeValues(in.size())); }
  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const auto* reps = index_values(in, values, 1, "repeats");
    if (!reps) throw Error("Tile needs repeats");
    return {tiled(*in[0], *reps)};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const Shape& ys = *out[0].shape;
    if (shape_numel(ys) == 0) return;
    const std::vector<int64_t> xst = row_major_strides(xs), yst = row_major_strides(ys);
    // Output index t * dim + i along each axis: a repeat dim (source stride 0) around each input dim.
    StridedBox box;
    for (size_t d = 0; d < xs.size(); ++d) {
      box.add_dim(ys[d] / std::max<int64_t>(1, xs[d]), 0, xs[d] * yst[d]);
      box.add_dim(xs[d], xst[d], yst[d]);
    }
    copy_box(rc, in[0].data, out[0].data, dtype_size(in[0].dtype), box);
  }

 private:
  static Shape tiled(const Shape& x, const std::vector<int64_t>& reps) {
    if (reps.size() != x.size())
      throw Error("repeats has " + std::to_string(reps.size()) + " values for input " + shape_str(x));
    Shape out(x.size());
    for (size_t d = 0; d < x.size(); ++d) {
      if (reps[d] < 0 || __builtin_mul_overflow(x[d], reps[d], &out[d]))
        throw Error("repeats " + values_str(reps) + " do not give input " + shape_str(x) + " a valid size");
    }
    return out;
  }
};

std::string check_split(const Node& n, const Graph& g) {
  if (n.since_version >= 13) {
    std::string r = require_index_input(g, n, 1, "split");
    if (!r.empty()) return r;
    if (n.since_version >= 18 && !n.has_input(1) && !n.has_attr("num_outputs")) return "Split without split sizes or num_outputs";
  }
  return require_fixed_size(g, n, 0);
}

std::string check_tile(const Node& n, const Graph& g) {
  std::string r = require_index_input(g, n, 1, "repeats");
  return r.empty() ? require_fixed_size(g, n, 0) : r;
}

std::unique_ptr<Op> create_split(const Node& n, const Graph&) {
  const bool from_input = n.since_version >= 13;
  const std::vector<int64_t> attr_split = from_input ? std::vector<int64_t>{} : n.attr_ints("split");
  const int64_t num_outputs = n.since_version >= 18 ? n.attr_i("num_outputs", 0) : 0;
  return std::make_unique<SplitImpl>(n.attr_i("axis", 0), n.outputs.size(), attr_split, num_outputs, from_input);
}

std::unique_ptr<Op> create_tile(const Node&, const Graph&) { return std::make_unique<TileImpl>(); }

std::vector<size_t> split_shape_inputs(const Node& n) {
  if (n.since_version < 13) return {};
  return {1};
}

std::vector<size_t> tile_shape_inputs(const Node&) { return {1}; }

}  // namespace

std::vector<OpDef> split_tile_op_defs() {
  return {
      {"Split", 2, 18, check_split, create_split, split_shape_inputs},
      {"Tile", 6, 13, check_tile, create_tile, tile_shape_inputs},
  };
}

}  // namespace optim
