// Slice (opsets 1-13): starts, ends and axes as attributes before opset 10, then inputs with steps; negative
// indices, negative steps and clamping as ONNX defines them; any fixed-size element type, copied as a strided box.
#include <algorithm>
#include <limits>

#include "index_inputs.h"
#include "strided_copy.h"

namespace optim {
namespace {

// What one run selects along each dim of the input: the first index, the step and how many.
struct SliceDims {
  Shape out;
  std::vector<int64_t> start, step;
};

SliceDims resolve(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  const std::vector<int64_t>* axes_in, const std::vector<int64_t>* steps_in) {
  const size_t n = starts.size();
  if (ends.size() != n) throw Error("starts has " + std::to_string(n) + " values, ends " + std::to_string(ends.size()));
  auto same_count = [n](const std::vector<int64_t>* v, const char* what) {
    if (v && v->size() != n) throw Error(std::string(what) + " has " + std::to_string(v->size()) + " values for " + std::to_string(n) + " starts");
  };
  same_count(axes_in, "axes");
  same_count(steps_in, "steps");
  const int64_t rank = static_cast<int64_t>(in.size());
  SliceDims s;
  s.out = in;
  s.start.assign(in.size(), 0);
  s.step.assign(in.size(), 1);
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t axis = normalize_axis(axes_in ? (*axes_in)[i] : static_cast<int64_t>(i), rank, "Slice axis");
    const size_t a = static_cast<size_t>(axis);
    if (seen[a]) throw Error("Slice axes repeat axis " + std::to_string(axis));
    seen[a] = true;
    const int64_t step = steps_in ? (*steps_in)[i] : 1;
    if (step == 0) throw Error("Slice step for axis " + std::to_string(axis) + " is 0");
    const int64_t dim = in[a];
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    // ONNX Runtime reads an end of INT32_MAX or INT64_MAX as numpy's None: through the last element in the
    // step's direction (ONNX's text clamps it, which with a negative step would select nothing).
    if (ends[i] == std::numeric_limits<int64_t>::max() || ends[i] == std::numeric_limits<int32_t>::max()) e = step < 0 ? -1 : dim;
    int64_t count = 0;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > b ? 1 + (e - b - 1) / step : 0;
    } else if (dim > 0) {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const uint64_t back = static_cast<uint64_t>(-(step + 1)) + 1;  // -step without overflow at INT64_MIN
      count = b > e ? 1 + static_cast<int64_t>(static_cast<uint64_t>(b - e - 1) / back) : 0;
    }
    s.out[a] = count;
    s.start[a] = count > 0 ? b : 0;
    s.step[a] = count > 1 ? step : 1;  // a step that is never taken stays out of the stride products
  }
  return s;
}

class SliceImpl : public Op {
 public:
  // Before opset 10 the bounds are attributes; from 10 they are inputs 1-4 (axes and steps optional).
  SliceImpl(bool from_inputs, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes)
      : from_inputs_(from_inputs), starts_(std::move(starts)), ends_(std::move(ends)), axes_(std::move(axes)) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    if (from_inputs_) throw Error("Slice needs the values of its starts and ends inputs");
    return {resolve(*in[0], starts_, ends_, axes_.empty() ? nullptr : &axes_, nullptr).out};
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    if (!from_inputs_) return infer(in);
    const auto* starts = index_values(in, values, 1, "starts");
    const auto* ends = index_values(in, values, 2, "ends");
    if (!starts || !ends) throw Error("Slice needs starts and ends");
    return {resolve(*in[0], *starts, *ends, index_values(in, values, 3, "axes"), index_values(in, values, 4, "steps")).out};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    if (out[0].numel() == 0) return;
    const Shape& xs = *in[0].shape;
    SliceDims s;
    if (from_inputs_) {
      auto optional = [&](size_t i, std::vector<int64_t>* v) -> const std::vector<int64_t>* {
        if (i >= in.size() || !in[i].present()) return nullptr;
        *v = int_values(in[i]);
        return v;
      };
      std::vector<int64_t> axes, steps;
      s = resolve(xs, int_values(in[1]), int_values(in[2]), optional(3, &axes), optional(4, &steps));
    } else {
      s = resolve(xs, starts_, ends_, axes_.empty() ? nullptr : &axes_, nullptr);
    }
    const std::vector<int64_t> xst = row_major_strides(xs), yst = row_major_strides(s.out);
    StridedBox box;
    int64_t offset = 0;
    for (size_t d = 0; d < xs.size(); ++d) {
      box.add_dim(s.out[d], xst[d] * s.step[d], yst[d]);
      offset += s.start[d] * xst[d];
    }
    const size_t elem = dtype_size(in[0].dtype);
    copy_box(rc, static_cast<const uint8_t*>(in[0].data) + offset * static_cast<int64_t>(elem), out[0].data, elem, box);
  }

 private:
  bool from_inputs_;
  std::vector<int64_t> starts_, ends_, axes_;
};

std::string check_slice(const Node& n, const Graph& g) {
  if (n.since_version < 10) {
    if (!n.has_attr("starts") || !n.has_attr("ends")) return "Slice without starts and ends attributes";
    return require_fixed_size(g, n, 0);
  }
  static const char* what[] = {"", "starts", "ends", "axes", "steps"};
  for (size_t i = 1; i <= 4; ++i) {
    std::string r = require_index_input(g, n, i, what[i]);
    if (!r.empty()) return r;
  }
  return require_fixed_size(g, n, 0);
}

std::unique_ptr<Op> create_slice(const Node& n, const Graph&) {
  if (n.since_version >= 10) return std::make_unique<SliceImpl>(true, Shape{}, Shape{}, Shape{});
  return std::make_unique<SliceImpl>(false, n.attr_ints("starts"), n.attr_ints("ends"), n.attr_ints("axes"));
}

std::vector<size_t> slice_shape_inputs(const Node& n) {
  if (n.since_version < 10) return {};
  return {1, 2, 3, 4};
}

}  // namespace

std::vector<OpDef> slice_op_defs() {
  return {{"Slice", 1, 13, check_slice, create_slice, slice_shape_inputs}};
}

}  // namespace optim
