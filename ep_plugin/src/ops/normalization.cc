// Normalizations on float32: BatchNormalization (inference), InstanceNormalization, LayerNormalization,
// RMSNormalization (also what rewrites/rms_norm.cc makes of the exporters' written-out RMSNorm), Softmax.
#include <algorithm>
#include <cmath>

#include "op.h"

namespace optim {
namespace {

// Row reductions with 8 independent partial results, so the compiler vectorizes them and the adds do
// not wait on one running total (a float sum or max cannot be reordered otherwise).
constexpr int kLanes = 8;

// sum of (x[i] - center)^power for power 1 or 2, partial sums in float, combined in double.
template <int Power>
double row_sum(const float* __restrict x, int64_t n, float center) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - center;
      part[j] += Power == 2 ? d * d : d;
    }
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += part[j];
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - center;
    s += Power == 2 ? d * d : d;
  }
  return s;
}

// Elements per normalized row of x: the product of its dims from `axis` on (`what` names the attribute in errors).
int64_t row_size(const Shape& x, int64_t axis, const char* what) {
  const int64_t from = normalize_axis(axis, static_cast<int64_t>(x.size()), what);
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(from); i < x.size(); ++i) inner *= x[i];
  return inner;
}

// Throws unless inputs 1.. each hold one value per channel (dim 1) of input 0; names[i] names input i.
void require_per_channel(const std::vector<const Shape*>& in, const std::vector<const char*>& names) {
  const Shape& x = *in[0];
  for (size_t i = 1; i < names.size(); ++i)
    if (shape_numel(*in[i]) != x[1])
      throw Error(std::string(names[i]) + " " + shape_str(*in[i]) + " does not match the " + std::to_string(x[1]) +
                  " channels of " + names[0] + " " + shape_str(x));
}

// Calls plane(p, inner) for each (n, c) plane p of x (inner elements each): one task per plane when x is
// large enough to be worth ORT's thread pool, else all planes in one task.
template <typename F>
void for_each_plane(const RunContext& rc, const Shape& xs, F plane) {
  int64_t inner = 1;
  for (size_t i = 2; i < xs.size(); ++i) inner *= xs[i];
  const int64_t planes = xs[0] * xs[1];
  const bool split = planes * inner > (1 << 15);
  rc.parallel_for(split ? static_cast<size_t>(planes) : 1, [&](size_t t) {
    const int64_t p0 = split ? static_cast<int64_t>(t) : 0;
    const int64_t p1 = split ? p0 + 1 : planes;
    for (int64_t p = p0; p < p1; ++p) plane(p, inner);
  });
}

// BatchNormalization (inference) as y = x * a[c] + b[c], with a and b folded from scale/B/mean/var on
// each run (C values, negligible next to the pass over x), so the parameters may be computed upstream.
class BatchNormImpl : public Op {
 public:
  explicit BatchNormImpl(float eps) : eps_(eps) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() < 2) throw Error("X " + shape_str(x) + " has no channel dim");
    require_per_channel(in, {"X", "scale", "B", "input_mean", "input_var"});
    return {x};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t c = xs[1];
    std::vector<float> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
    const float *scale = in[1].as<float>(), *bias = in[2].as<float>(), *mean = in[3].as<float>(), *var = in[4].as<float>();
    for (int64_t i = 0; i < c; ++i) {
      a[i] = scale[i] / std::sqrt(var[i] + eps_);
      b[i] = bias[i] - mean[i] * a[i];
    }
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    for_each_plane(rc, xs, [&](int64_t p, int64_t inner) {
      const int64_t ch = p % c;
      // y = x * a + b: one multiply pass then one add pass through the vector kernels.
      rc.kernels.binary_vs(kernels::BinaryOp::kMul, x + p * inner, a[ch], y + p * inner, inner);
      rc.kernels.binary_vs(kernels::BinaryOp::kAdd, y + p * inner, b[ch], y + p * inner, inner);
    });
  }

 private:
  float eps_;
};

// LayerNormalization over dims [axis, rank): scale and optional bias of the normalized shape, and the
// optional Mean / InvStdDev outputs (shape X[:axis] followed by ones).
class LayerNormImpl : public Op {
 public:
  LayerNormImpl(int64_t axis, float eps) : axis_(axis), eps_(eps) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    const int64_t inner = inner_size(x);
    for (size_t i = 1; i < in.size() && i < 3; ++i)
      if (in[i] && shape_numel(*in[i]) != inner)
        throw Error(std::string(i == 1 ? "scale " : "bias ") + shape_str(*in[i]) + " does not match the normalized size " +
                    std::to_string(inner) + " of X " + shape_str(x));
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.size()), "LayerNormalization axis"));
    Shape stat(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
    stat.resize(x.size(), 1);
    return {x, stat, stat};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t inner = inner_size(*in[0].shape);
    const int64_t rows = inner ? in[0].numel() / inner : 0;
    const float* x = in[0].as<float>();
    const float* scale = in[1].as<float>();
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    float* mean_out = out.size() > 1 ? out[1].as<float>() : nullptr;
    float* inv_out = out.size() > 2 ? out[2].as<float>() : nullptr;
    parallel_rows(rc, rows, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * inner;
        float* yr = y + r * inner;
        const float m = static_cast<float>(row_sum<1>(xr, inner, 0.f) / static_cast<double>(inner));
        const double var = row_sum<2>(xr, inner, m) / static_cast<double>(inner);
        const float inv = static_cast<float>(1.0 / std::sqrt(var + eps_));
        if (mean_out) mean_out[r] = m;
        if (inv_out) inv_out[r] = inv;
        for (int64_t i = 0; i < inner; ++i) {
          const float v = (xr[i] - m) * inv * scale[i];
          yr[i] = bias ? v + bias[i] : v;
        }
      }
    });
  }

 private:
  int64_t inner_size(const Shape& x) const { return row_size(x, axis_, "LayerNormalization axis"); }
  int64_t axis_;
  float eps_;
};

// RMSNormalization (opset 23): each row over dims [axis, rank) divided by the root of its mean square (+ epsilon),
// times scale (one value per normalized element).
class RmsNormImpl : public Op {
 public:
  RmsNormImpl(int64_t axis, float eps) : axis_(axis), eps_(eps) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    const int64_t inner = inner_size(x);
    if (shape_numel(*in[1]) != inner)
      throw Error("scale " + shape_str(*in[1]) + " does not match the normalized size " + std::to_string(inner) +
                  " of X " + shape_str(x));
    return {x};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t inner = inner_size(*in[0].shape);
    const int64_t rows = inner ? in[0].numel() / inner : 0;
    const float *x = in[0].as<float>(), *scale = in[1].as<float>();
    float* y = out[0].as<float>();
    parallel_rows(rc, rows, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * inner;
        float* yr = y + r * inner;
        const float inv = static_cast<float>(1.0 / std::sqrt(row_sum<2>(xr, inner, 0.f) / static_cast<double>(inner) + eps_));
        for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * inv * scale[i];
      }
    });
  }

 private:
  int64_t inner_size(const Shape& x) const { return row_size(x, axis_, "RMSNormalization axis"); }
  int64_t axis_;
  float eps_;
};

// InstanceNormalization: each (n, c) plane normalized by its own mean and variance, then scale[c] and B[c]
// (a GroupNorm with one channel per group exports as this: Wav2Vec2's first feature-encoder layer).
class InstanceNormImpl : public Op {
 public:
  explicit InstanceNormImpl(float eps) : eps_(eps) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() < 3) throw Error("input " + shape_str(x) + " needs a channel dim and at least one spatial dim");
    require_per_channel(in, {"input", "scale", "B"});
    return {x};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t c = (*in[0].shape)[1];
    const float *x = in[0].as<float>(), *scale = in[1].as<float>(), *bias = in[2].as<float>();
    float* y = out[0].as<float>();
    for_each_plane(rc, *in[0].shape, [&](int64_t p, int64_t inner) {
      if (inner == 0) return;  // an empty plane has no first value to sum around, and nothing to write
      const float* xp = x + p * inner;
      // Summed around the plane's first value, not 0: float partial sums of a large mean would lose the
      // digits of a small spread. The float mean's rounding (delta) is folded into the bias below.
      const double mean = xp[0] + row_sum<1>(xp, inner, xp[0]) / static_cast<double>(inner);
      const float m = static_cast<float>(mean);
      const double delta = mean - m;
      const double var = std::max(0.0, row_sum<2>(xp, inner, m) / static_cast<double>(inner) - delta * delta);
      const double a = scale[p % c] / std::sqrt(var + eps_);
      const float af = static_cast<float>(a), b = static_cast<float>(bias[p % c] - delta * a);
      float* yp = y + p * inner;
      // Centred first (not x * a + b): x - m is exact where it matters, x * a would round before the sum.
      for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * af + b;
    });
  }

 private:
  float eps_;
};

class SoftmaxImpl : public Op {
 public:
  SoftmaxImpl(int64_t axis, bool flatten) : axis_(axis), flatten_(flatten) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    normalize_axis(axis_, static_cast<int64_t>(in[0]->size()), "Softmax axis");
    return {*in[0]};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t r = static_cast<int64_t>(xs.size());
    const int64_t axis = normalize_axis(axis_, r, "Softmax axis");
    // Opset < 13 normalizes over all dims from axis on; opset 13 over the one axis (stride `inner`).
    int64_t len = 1, inner = 1, outer = 1;
    if (flatten_) {
      for (int64_t i = axis; i < r; ++i) len *= xs[static_cast<size_t>(i)];
    } else {
      len = xs[static_cast<size_t>(axis)];
      for (int64_t i = axis + 1; i < r; ++i) inner *= xs[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < axis; ++i) outer *= xs[static_cast<size_t>(i)];
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    const int64_t lines = outer * inner;
    const int64_t tasks = lines * len > (1 << 14) ? std::min<int64_t>(lines, 64) : 1;
    rc.parallel_for(static_cast<size_t>(std::max<int64_t>(tasks, 1)), [&](size_t t) {
      const int64_t per = (lines + tasks - 1) / std::max<int64_t>(tasks, 1);
      const int64_t l0 = static_cast<int64_t>(t) * per, l1 = std::min(lines, l0 + per);
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t base = (l / inner) * len * inner + (l % inner);
        if (inner == 1) {  // contiguous line: the softmax kernel
          rc.kernels.softmax(x + base, y + base, len);
          continue;
        }
        float mx = -INFINITY;
        for (int64_t i = 0; i < len; ++i) mx = std::max(mx, x[base + i * inner]);
        float sum = 0.f;
        for (int64_t i = 0; i < len; ++i) {
          const float e = std::exp(x[base + i * inner] - mx);
          y[base + i * inner] = e;
          sum += e;
        }
        const float inv = 1.f / sum;
        for (int64_t i = 0; i < len; ++i) y[base + i * inner] *= inv;
      }
    });
  }

 private:
  int64_t axis_;
  bool flatten_;
};

std::string check_batchnorm(const Node& n, const Graph& g) {
  if (n.attr_i("training_mode", 0) != 0) return "BatchNormalization training_mode=1 is not supported";
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) return "BatchNormalization running mean/var outputs are not supported";
  if (n.num_inputs() < 5) return "BatchNormalization needs 5 inputs";
  return require_float_inputs(g, n);
}

std::string check_layernorm(const Node& n, const Graph& g) {
  if (n.attr_i("stash_type", 1) != 1) return "LayerNormalization stash_type other than float32 is not supported";
  return require_float_inputs(g, n);
}

std::string check_rmsnorm(const Node& n, const Graph& g) {
  if (n.attr_i("stash_type", 1) != 1) return "RMSNormalization stash_type other than float32 is not supported";
  return require_float_inputs(g, n);
}

std::string check_softmax(const Node& n, const Graph& g) { return require_float(g, n, 0); }

std::string check_instancenorm(const Node& n, const Graph& g) {
  if (n.num_inputs() < 3) return "InstanceNormalization needs 3 inputs";
  return require_float_inputs(g, n);
}

std::unique_ptr<Op> create_batchnorm(const Node& n, const Graph&) {
  return std::make_unique<BatchNormImpl>(n.attr_f("epsilon", 1e-5f));
}
std::unique_ptr<Op> create_layernorm(const Node& n, const Graph&) {
  return std::make_unique<LayerNormImpl>(n.attr_i("axis", -1), n.attr_f("epsilon", 1e-5f));
}
std::unique_ptr<Op> create_rmsnorm(const Node& n, const Graph&) {
  return std::make_unique<RmsNormImpl>(n.attr_i("axis", -1), n.attr_f("epsilon", 1e-5f));
}
std::unique_ptr<Op> create_instancenorm(const Node& n, const Graph&) {
  return std::make_unique<InstanceNormImpl>(n.attr_f("epsilon", 1e-5f));
}
std::unique_ptr<Op> create_softmax(const Node& n, const Graph&) {
  const bool old = n.since_version < 13;
  return std::make_unique<SoftmaxImpl>(n.attr_i("axis", old ? 1 : -1), old);
}

}  // namespace

std::vector<OpDef> normalization_op_defs() {
  return {
      {"BatchNormalization", 9, 15, check_batchnorm, create_batchnorm},
      {"InstanceNormalization", 6, 22, check_instancenorm, create_instancenorm},
      {"LayerNormalization", 17, 17, check_layernorm, create_layernorm},
      {"RMSNormalization", 23, 23, check_rmsnorm, create_rmsnorm},
      {"Softmax", 1, 13, check_softmax, create_softmax},
  };
}

}  // namespace optim
