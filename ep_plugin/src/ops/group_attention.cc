// optim.internal GroupAttention (rewrites/group_attention.cc): softmax(scale * Q K^T + mask) V per query head,
// query head h reading key / value head h / (Hq / Hkv) of the cache where it lies. What it replaces copied the
// cache twice per step (the Expand that repeats each key / value head for its query heads, the Transpose of K)
// and ran each head's one-row products through the GEMM's packing.
// Inputs: Q [B, Hq, S, D], K [B, Hkv, T, D], V [B, Hkv, T, Dv], mask (optional, float32, broadcasting to
// [B, Hq, S, T]); then the int64 shapes of the Expand and Reshape that repeated K's heads, and V's (optional: absent
// when Hq = Hkv and nothing was repeated), checked to say exactly that; then (optional) the cache's length: K and V
// are then [B, Hkv, capacity, D] buffers of which the first `length` positions are read (a cache kept at a fixed
// capacity, llm/cache_layout.py: the Slice that cut them is taken into the step). Attributes: scale, k_allowzero
// and v_allowzero (the Reshapes'). Output [B, Hq, S, Dv].
#include <algorithm>

#include "op.h"

namespace optim {
namespace {

enum GroupAttentionInput : size_t { kQ = 0, kK, kV, kMask, kKExpand, kKReshape, kVExpand, kVReshape, kLength };

constexpr int64_t kBlockRows = 64;  // cache rows per block: 64 x 64 floats of a head, 16 KB

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
    const Shape &q = *in[kQ], k = valid(*in[kK], values), v = valid(*in[kV], values);
    if (q.size() != 4 || k.size() != 4 || v.size() != 4)
      throw Error(label_ + ": Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) + " must be 4-D");
    if (k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] || k[3] != q[3] || k[1] <= 0 || q[1] % k[1] != 0)
      throw Error(label_ + ": Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) +
                  " are not [B, heads, S, D], [B, kv heads, T, D], [B, kv heads, T, Dv] with heads a multiple of kv heads");
    if (in.size() > kMask && in[kMask]) {
      const Shape& m = *in[kMask];
      const Shape scores = {q[0], q[1], q[2], k[2]};
      // With a length input whose value is not known here, T is not yet either: run() checks the mask's last dim.
      const bool t_known = in.size() <= kLength || !in[kLength] || (values.size() > kLength && values[kLength]);
      bool fits = m.size() <= 4;
      for (size_t i = 0; fits && i < m.size(); ++i) {
        const int64_t want = scores[4 - m.size() + i];
        fits = m[i] == 1 || m[i] == want || (i + 1 == m.size() && !t_known);
      }
      if (!fits) throw Error(label_ + ": mask " + shape_str(m) + " does not broadcast to the scores " + shape_str(scores));
    }
    check_repeat(values, kKExpand, kKReshape, allowzero_[0], q, k, "K");
    check_repeat(values, kVExpand, kVReshape, allowzero_[1], q, v, "V");
    return {{q[0], q[1], q[2], v[3]}};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const Shape &q = *in[kQ], &kv = *in[kV];  // a capacity's worth of scores at most
    return static_cast<size_t>(q[0] * q[1] * kv[2] + q[0] * kv[1] * kv[3]) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &q = *in[kQ].shape, &kv = *in[kV].shape;
    Dims a{q[0], q[1], q[2], q[3], kv[1], kv[2], kv[2], kv[3], q[1] / kv[1]};
    if (in.size() > kLength && in[kLength].present()) {
      if (in[kLength].numel() != 1) throw Error(label_ + ": the cache length is not one value");
      a.t = cut_length(*in[kLength].as<int64_t>(), a.capacity);
    }
    if (a.batch * a.heads * a.s == 0) return;
    // The mask's element strides over [B, Hq, S, T] (0 where it broadcasts).
    const float* mask = in.size() > kMask && in[kMask].present() ? in[kMask].as<float>() : nullptr;
    int64_t mstride[4] = {0, 0, 0, 0};
    if (mask) {
      const Shape& m = *in[kMask].shape;
      if (m.back() != 1 && m.back() != a.t)
        throw Error(label_ + ": mask " + shape_str(m) + " does not cover the cache's " + std::to_string(a.t) + " positions");
      int64_t step = 1;
      for (size_t i = m.size(); i-- > 0;) {
        mstride[4 - m.size() + i] = m[i] == 1 ? 0 : step;
        step *= m[i];
      }
    }
    const Operands ops{in[kQ].as<float>(), in[kK].as<float>(), in[kV].as<float>(), mask, mstride, out[0].as<float>()};
    heads_together(rc, a, ops);
  }

 private:
  struct Dims {
    int64_t batch, heads, s, d, kv_heads, t, capacity, dv, group;  // t of the capacity positions are the cache
  };
  struct Operands {
    const float *q, *k, *v, *mask;
    const int64_t* mstride;
    float* y;
  };

  // Slice's end on a dimension of `capacity`: negative from the end, clamped into [0, capacity].
  static int64_t cut_length(int64_t end, int64_t capacity) {
    if (end < 0) end += capacity;
    return std::clamp<int64_t>(end, 0, capacity);
  }

  // A cache's shape as the attention sees it: its positions cut to the length input's value when known.
  Shape valid(const Shape& s, const ShapeValues& values) const {
    if (s.size() != 4 || values.size() <= kLength || !values[kLength] || values[kLength]->size() != 1) return s;
    return {s[0], s[1], cut_length((*values[kLength])[0], s[2]), s[3]};
  }

  // Adds the mask's row (b, h, query i) over the cache's t positions to scores.
  static void add_mask(const Operands& o, int64_t b, int64_t h, int64_t i, int64_t t, float* scores) {
    if (!o.mask) return;
    const float* row = o.mask + b * o.mstride[0] + h * o.mstride[1] + i * o.mstride[2];
    if (o.mstride[3] == 1) {
      for (int64_t j = 0; j < t; ++j) scores[j] += row[j];  // (vectorized)
    } else {
      for (int64_t j = 0; j < t; ++j) scores[j] += row[j * o.mstride[3]];
    }
  }

  // One task per batch row and key / value head, its G query heads together: the cache is taken kBlockRows rows
  // at a time, each block read from memory once for the G heads (then from L1).
  void heads_together(const RunContext& rc, const Dims& a, const Operands& o) const {
    auto* scratch = static_cast<float*>(rc.scratch());
    rc.parallel_for(static_cast<size_t>(a.batch * a.kv_heads), [&](size_t task) {
      const int64_t cache = static_cast<int64_t>(task), b = cache / a.kv_heads;
      const int64_t first_head = (cache % a.kv_heads) * a.group;  // query heads first_head .. + G read this cache
      float* scores = scratch + cache * a.group * a.t;  // [G, T]
      float* part = scratch + a.batch * a.heads * a.t + cache * a.dv;
      const float* keys = o.k + cache * a.capacity * a.d;
      const float* values = o.v + cache * a.capacity * a.dv;
      for (int64_t i = 0; i < a.s; ++i) {
        for (int64_t j0 = 0; j0 < a.t; j0 += kBlockRows) {
          const int64_t n = std::min(kBlockRows, a.t - j0);
          for (int64_t g = 0; g < a.group; ++g) {
            const int64_t h = first_head + g;
            rc.kernels.dot_rows(o.q + ((b * a.heads + h) * a.s + i) * a.d, keys + j0 * a.d, a.d, n, a.d, scale_,
                                scores + g * a.t + j0);
          }
        }
        for (int64_t g = 0; g < a.group; ++g) {
          const int64_t h = first_head + g;
          add_mask(o, b, h, i, a.t, scores + g * a.t);
          rc.kernels.softmax(scores + g * a.t, scores + g * a.t, a.t);
          std::fill_n(o.y + ((b * a.heads + h) * a.s + i) * a.dv, a.dv, 0.f);
        }
        for (int64_t j0 = 0; j0 < a.t; j0 += kBlockRows) {
          const int64_t n = std::min(kBlockRows, a.t - j0);
          for (int64_t g = 0; g < a.group; ++g) {
            float* yi = o.y + ((b * a.heads + first_head + g) * a.s + i) * a.dv;
            rc.kernels.sum_rows(scores + g * a.t + j0, values + j0 * a.dv, a.dv, n, a.dv, part);
            for (int64_t c = 0; c < a.dv; ++c) yi[c] += part[c];
          }
        }
      }
    });
  }

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
