// optim.internal GroupAttention (rewrites/group_attention.cc): softmax(scale * Q K^T + mask) V per query head,
// query head h reading key / value head h / (Hq / Hkv) of the cache where it lies. What it replaces copied the
// cache twice per step (the Expand that repeats each key / value head for its query heads, the Transpose of K)
// and ran each head's one-row products through the GEMM's packing.
// Inputs: Q [B, Hq, S, D], K [B, Hkv, T, D], V [B, Hkv, T, Dv], mask (optional, float32, broadcasting to
// [B, Hq, S, T]); then the int64 shapes of the Expand and Reshape that repeated K's heads, and V's (optional: absent
// when Hq = Hkv and nothing was repeated), checked to say exactly that. Attributes: scale, k_allowzero and
// v_allowzero (the Reshapes'). Output [B, Hq, S, Dv].
#include <algorithm>

#include "op.h"

namespace optim {
namespace {

enum GroupAttentionInput : size_t { kQ = 0, kK, kV, kMask, kKExpand, kKReshape, kVExpand, kVReshape };

class GroupAttention : public Op {
 public:
  GroupAttention(const Node& n, const Graph&)
      : label_(n.label()), scale_(n.attr_f("scale", 1.f)),
        allowzero_{n.attr_i("k_allowzero", 0) != 0, n.attr_i("v_allowzero", 0) != 0} {}

  void prepare(const kernels::KernelTable& kt) override {
    kernel_ = std::string(kt.dot_rows.name) + " + " + kt.softmax.name + " + " + kt.sum_rows.name;
  }
  std::string kernel_name() const override { return kernel_; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return infer(in, ShapeValues(in.size())); }

  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const Shape &q = *in[kQ], &k = *in[kK], &v = *in[kV];
    if (q.size() != 4 || k.size() != 4 || v.size() != 4)
      throw Error(label_ + ": Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) + " must be 4-D");
    if (k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] || k[3] != q[3] || k[1] <= 0 || q[1] % k[1] != 0)
      throw Error(label_ + ": Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) +
                  " are not [B, heads, S, D], [B, kv heads, T, D], [B, kv heads, T, Dv] with heads a multiple of kv heads");
    if (in.size() > kMask && in[kMask]) {
      const Shape& m = *in[kMask];
      const Shape scores = {q[0], q[1], q[2], k[2]};
      bool fits = m.size() <= 4;
      for (size_t i = 0; fits && i < m.size(); ++i) {
        const int64_t want = scores[4 - m.size() + i];
        fits = m[i] == 1 || m[i] == want;
      }
      if (!fits) throw Error(label_ + ": mask " + shape_str(m) + " does not broadcast to the scores " + shape_str(scores));
    }
    check_repeat(values, kKExpand, kKReshape, allowzero_[0], q, k, "K");
    check_repeat(values, kVExpand, kVReshape, allowzero_[1], q, v, "V");
    return {{q[0], q[1], q[2], v[3]}};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    return static_cast<size_t>((*in[kQ])[0] * (*in[kQ])[1] * (*in[kK])[2]) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &q = *in[kQ].shape, &kv = *in[kV].shape;
    const int64_t batch = q[0], heads = q[1], s = q[2], d = q[3], kv_heads = kv[1], t = kv[2], dv = kv[3];
    const int64_t group = heads / kv_heads;
    if (batch * heads * s == 0) return;
    // The mask's element strides over [B, Hq, S, T] (0 where it broadcasts).
    const float* mask = in.size() > kMask && in[kMask].present() ? in[kMask].as<float>() : nullptr;
    int64_t mstride[4] = {0, 0, 0, 0};
    if (mask) {
      const Shape& m = *in[kMask].shape;
      int64_t step = 1;
      for (size_t i = m.size(); i-- > 0;) {
        mstride[4 - m.size() + i] = m[i] == 1 ? 0 : step;
        step *= m[i];
      }
    }
    const float *qp = in[kQ].as<float>(), *kp = in[kK].as<float>(), *vp = in[kV].as<float>();
    float* y = out[0].as<float>();
    auto* scores_of = static_cast<float*>(rc.scratch());
    rc.parallel_for(static_cast<size_t>(batch * heads), [&](size_t task) {
      const int64_t b = static_cast<int64_t>(task) / heads, h = static_cast<int64_t>(task) % heads;
      const int64_t cache = b * kv_heads + h / group;
      const float* keys = kp + cache * t * d;
      const float* values = vp + cache * t * dv;
      float* scores = scores_of + static_cast<int64_t>(task) * t;
      for (int64_t i = 0; i < s; ++i) {
        rc.kernels.dot_rows(qp + ((b * heads + h) * s + i) * d, keys, d, t, d, scale_, scores);
        if (mask) {
          const float* row = mask + b * mstride[0] + h * mstride[1] + i * mstride[2];
          for (int64_t j = 0; j < t; ++j) scores[j] += row[j * mstride[3]];
        }
        rc.kernels.softmax(scores, scores, t);
        rc.kernels.sum_rows(scores, values, dv, t, dv, y + ((b * heads + h) * s + i) * dv);
      }
    });
  }

 private:
  // The Expand shape and Reshape shape that stood between the cache and its product (when the rewrite found
  // them) must repeat each of the cache's heads for `heads / kv heads` consecutive query heads:
  // [B, Hkv, 1, T, D] expanded to [B, Hkv, G, T, D], reshaped to [B, Hq, T, D].
  void check_repeat(const ShapeValues& values, size_t expand_at, size_t reshape_at, bool allowzero, const Shape& q,
                    const Shape& cache, const char* which) const {
    if (values.size() <= reshape_at || !values[expand_at] || !values[reshape_at]) return;
    const std::vector<int64_t>& e = *values[expand_at];
    const std::vector<int64_t>& r = *values[reshape_at];
    const int64_t group = q[1] / cache[1];
    const Shape expanded = {cache[0], cache[1], group, cache[2], cache[3]};
    const Shape unsqueezed = {cache[0], cache[1], 1, cache[2], cache[3]};
    bool ok = e.size() == 5;
    for (size_t i = 0; ok && i < 5; ++i) ok = (e[i] == 1 && unsqueezed[i] == expanded[i]) || e[i] == expanded[i];
    const Shape want = {cache[0], q[1], cache[2], cache[3]};
    ok = ok && r.size() == 4;
    int64_t known = 1, inferred = -1;
    for (size_t i = 0; ok && i < 4; ++i) {
      const int64_t dim = r[i] == 0 && !allowzero ? expanded[i] : r[i];
      if (dim == -1) {
        ok = inferred < 0;
        inferred = static_cast<int64_t>(i);
      } else {
        ok = dim == want[i];
        known *= dim;
      }
    }
    if (ok && inferred >= 0) ok = known > 0 && shape_numel(expanded) / known == want[static_cast<size_t>(inferred)];
    if (!ok)
      throw Error(label_ + ": the Expand to " + shape_str(Shape(e.begin(), e.end())) + " and Reshape to " +
                  shape_str(Shape(r.begin(), r.end())) + " of " + which + " " + shape_str(cache) +
                  " do not repeat its heads for the query's " + std::to_string(q[1]));
  }

  std::string label_;
  float scale_;
  bool allowzero_[2];
  std::string kernel_;
};

}  // namespace

std::unique_ptr<Op> create_group_attention(const Node& n, const Graph& g) { return std::make_unique<GroupAttention>(n, g); }

}  // namespace optim
