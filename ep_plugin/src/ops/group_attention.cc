// optim.internal GroupAttention (rewrites/group_attention.cc): softmax(scale * Q K^T + mask) V per query head,
// query head h reading key / value head h / (Hq / Hkv) of the cache where it lies. What it replaces copied the
// cache twice per step (the Expand that repeats each key / value head for its query heads, the Transpose of K)
// and ran each head's one-row products through the GEMM's packing.
// Inputs: Q [B, Hq, S, D], K [B, Hkv, T, D], V [B, Hkv, T, Dv], mask (optional, float32, broadcasting to
// [B, Hq, S, T]); then the int64 shapes of the Expand and Reshape that repeated K's heads, and V's (optional: absent
// when Hq = Hkv and nothing was repeated), checked to say exactly that. Attributes: scale, k_allowzero and
// v_allowzero (the Reshapes'), sequence_first: 1 when K and V are [T, B, Hkv, D] (a cache kept sequence-first, so
// that a step's new rows follow the past ones in memory and the caller can share one buffer between past and
// present; the rewrite took away the Transposes back to [B, Hkv, T, D]). Output [B, Hq, S, Dv].
#include <algorithm>
#include <cmath>
#include <limits>

#include "op.h"

namespace optim {
namespace {

enum GroupAttentionInput : size_t { kQ = 0, kK, kV, kMask, kKExpand, kKReshape, kVExpand, kVReshape };

constexpr int64_t kBlockRows = 64;   // cache rows per block: 64 x 64 floats of a head, 16 KB
constexpr int64_t kChunkRows = 256;  // a decode over a sequence-first cache: rows per task, at least (but for the
constexpr int64_t kMaxChunks = 16;   //   last), and at most this many tasks per batch row: a chunk's own softmax
                                     //   and its joining cost ~1 us per head, worth it on long caches only

class GroupAttention : public Op {
 public:
  GroupAttention(const Node& n, const Graph&)
      : label_(n.label()), scale_(n.attr_f("scale", 1.f)),
        allowzero_{n.attr_i("k_allowzero", 0) != 0, n.attr_i("v_allowzero", 0) != 0},
        sequence_first_(n.attr_i("sequence_first", 0) != 0) {}

  void prepare(const kernels::KernelTable& kt) override {
    kernel_ = std::string(kt.dot_rows.name) + " + " + kt.softmax.name + " + " + kt.sum_rows.name;
  }
  std::string kernel_name() const override { return kernel_; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return infer(in, ShapeValues(in.size())); }

  std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const override {
    const Shape &q = *in[kQ], k = batch_first(*in[kK]), v = batch_first(*in[kV]);
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
    const Shape &q = *in[kQ], kv = batch_first(*in[kV]), k = batch_first(*in[kK]);
    const int64_t batch = q[0], heads = q[1], t = kv[2], dv = kv[3], kv_tasks = q[0] * kv[1];
    int64_t floats = batch * heads * t + kv_tasks * dv;  // heads_together: scores, a value row per task
    if (sequence_first_ && q[2] > 1) floats += kv_tasks * t * (k[3] + dv);  // each task's head, batch-first
    if (sequence_first_ && q[2] == 1) {  // cache_chunks: scores, per chunk outputs, stats and a value row
      const int64_t chunks = chunk_count(t);
      floats = std::max(floats, batch * heads * t + batch * chunks * (heads * (dv + 2) + dv));
    }
    return static_cast<size_t>(floats) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape &q = *in[kQ].shape, kv = batch_first(*in[kV].shape);
    Dims a{q[0], q[1], q[2], q[3], kv[1], kv[2], kv[3], q[1] / kv[1]};
    if (a.batch * a.heads * a.s == 0) return;
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
    const Operands ops{in[kQ].as<float>(), in[kK].as<float>(), in[kV].as<float>(), mask, mstride, out[0].as<float>()};
    if (sequence_first_ && a.s == 1 && a.t > kChunkRows)
      cache_chunks(rc, a, ops);
    else
      heads_together(rc, a, ops);
  }

 private:
  struct Dims {
    int64_t batch, heads, s, d, kv_heads, t, dv, group;
  };
  struct Operands {
    const float *q, *k, *v, *mask;
    const int64_t* mstride;
    float* y;
  };

  static int64_t chunk_count(int64_t t) { return std::clamp<int64_t>((t + kChunkRows - 1) / kChunkRows, 1, kMaxChunks); }

  // Adds the mask's row (b, h, query i) over cache positions [j0, j0 + n) to scores[0, n).
  static void add_mask(const Operands& o, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n, float* scores) {
    if (!o.mask) return;
    const float* row = o.mask + b * o.mstride[0] + h * o.mstride[1] + i * o.mstride[2];
    if (o.mstride[3] == 1) {
      for (int64_t j = 0; j < n; ++j) scores[j] += row[j0 + j];  // (vectorized)
    } else {
      for (int64_t j = j0; j < j0 + n; ++j) scores[j - j0] += row[j * o.mstride[3]];
    }
  }

  // The largest of x[0, n) (n > 0), in eight independent lanes the compiler vectorizes.
  static float max_of(const float* x, int64_t n) {
    float lane[8];
    std::fill_n(lane, 8, x[0]);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      for (int l = 0; l < 8; ++l) lane[l] = lane[l] > x[j + l] ? lane[l] : x[j + l];
    float m = lane[0];
    for (int l = 1; l < 8; ++l) m = m > lane[l] ? m : lane[l];
    for (; j < n; ++j) m = m > x[j] ? m : x[j];
    return m;
  }

  // One task per batch row and key / value head, its G query heads together: the cache is taken kBlockRows rows
  // at a time, each block read from memory once for the G heads (then from L1). A sequence-first cache is read
  // where it lies for one query row (a decode step on a cache of up to kChunkRows rows); for a prefill it is first
  // copied to the task's scratch batch-first, rather than read strided once per query row.
  void heads_together(const RunContext& rc, const Dims& a, const Operands& o) const {
    auto* scratch = static_cast<float*>(rc.scratch());
    const int64_t kv_tasks = a.batch * a.kv_heads;
    rc.parallel_for(static_cast<size_t>(kv_tasks), [&](size_t task) {
      const int64_t cache = static_cast<int64_t>(task), b = cache / a.kv_heads;
      float* scores = scratch + cache * a.group * a.t;  // [G, T]
      float* part = scratch + a.batch * a.heads * a.t + cache * a.dv;
      // Row j of a head's keys: [B, Hkv, T, D] rows are adjacent; [T, B, Hkv, D] ones a batch of heads apart.
      const float* keys = o.k + cache * (sequence_first_ ? a.d : a.t * a.d);
      const float* values = o.v + cache * (sequence_first_ ? a.dv : a.t * a.dv);
      int64_t ldk = sequence_first_ ? kv_tasks * a.d : a.d, ldv = sequence_first_ ? kv_tasks * a.dv : a.dv;
      if (sequence_first_ && a.s > 1) {
        float* copy = scratch + a.batch * a.heads * a.t + kv_tasks * a.dv + cache * a.t * (a.d + a.dv);
        for (int64_t j = 0; j < a.t; ++j) {
          std::copy_n(o.k + (j * kv_tasks + cache) * a.d, a.d, copy + j * a.d);
          std::copy_n(o.v + (j * kv_tasks + cache) * a.dv, a.dv, copy + a.t * a.d + j * a.dv);
        }
        keys = copy;
        values = copy + a.t * a.d;
        ldk = a.d;
        ldv = a.dv;
      }
      for (int64_t i = 0; i < a.s; ++i) {
        for (int64_t j0 = 0; j0 < a.t; j0 += kBlockRows) {
          const int64_t n = std::min(kBlockRows, a.t - j0);
          for (int64_t g = 0; g < a.group; ++g) {
            const int64_t h = (cache % a.kv_heads) * a.group + g;
            rc.kernels.dot_rows(o.q + ((b * a.heads + h) * a.s + i) * a.d, keys + j0 * ldk, ldk, n, a.d, scale_,
                                scores + g * a.t + j0);
          }
        }
        for (int64_t g = 0; g < a.group; ++g) {
          const int64_t h = (cache % a.kv_heads) * a.group + g;
          add_mask(o, b, h, i, 0, a.t, scores + g * a.t);
          rc.kernels.softmax(scores + g * a.t, scores + g * a.t, a.t);
          std::fill_n(o.y + ((b * a.heads + h) * a.s + i) * a.dv, a.dv, 0.f);
        }
        for (int64_t j0 = 0; j0 < a.t; j0 += kBlockRows) {
          const int64_t n = std::min(kBlockRows, a.t - j0);
          for (int64_t g = 0; g < a.group; ++g) {
            float* yi = o.y + ((b * a.heads + (cache % a.kv_heads) * a.group + g) * a.s + i) * a.dv;
            rc.kernels.sum_rows(scores + g * a.t + j0, values + j0 * ldv, ldv, n, a.dv, part);
            for (int64_t c = 0; c < a.dv; ++c) yi[c] += part[c];
          }
        }
      }
    });
  }

  // A decode step over a sequence-first cache [T, B, Hkv, D]: one task per batch row and chunk of the cache's rows,
  // every head in it, so that each task reads its rows front to back (a position's heads lie together). Each chunk's
  // softmax is its own; the chunks are then joined by their maxima m_c and sums l_c: y = sum_c w_c y_c / sum_c w_c,
  // w_c = exp(m_c - max m) l_c (l_c = 1 / the probability at the maximum: exp(0) / l_c). With one chunk (caches up
  // to kChunkRows) its softmax is the row's and its sums go straight to the output.
  void cache_chunks(const RunContext& rc, const Dims& a, const Operands& o) const {
    const int64_t chunks = chunk_count(a.t);
    auto* scores = static_cast<float*>(rc.scratch());              // [B, Hq, T]
    float* partial = scores + a.batch * a.heads * a.t;              // [B, C, Hq, Dv]
    float* stats = partial + a.batch * chunks * a.heads * a.dv;     // [B, C, Hq, 2]: m_c, l_c
    float* rows = stats + a.batch * chunks * a.heads * 2;           // [B, C, Dv]
    const int64_t ldk = a.batch * a.kv_heads * a.d, ldv = a.batch * a.kv_heads * a.dv;
    rc.parallel_for(static_cast<size_t>(a.batch * chunks), [&](size_t task) {
      const int64_t b = static_cast<int64_t>(task) / chunks, c = static_cast<int64_t>(task) % chunks;
      const int64_t begin = a.t * c / chunks, end = a.t * (c + 1) / chunks;
      float* part = rows + static_cast<int64_t>(task) * a.dv;
      for (int64_t j0 = begin; j0 < end; j0 += kBlockRows) {
        const int64_t n = std::min(kBlockRows, end - j0);
        for (int64_t h = 0; h < a.heads; ++h)
          rc.kernels.dot_rows(o.q + (b * a.heads + h) * a.d, o.k + j0 * ldk + (b * a.kv_heads + h / a.group) * a.d,
                              ldk, n, a.d, scale_, scores + (b * a.heads + h) * a.t + j0);
      }
      for (int64_t h = 0; h < a.heads; ++h) {
        float* row = scores + (b * a.heads + h) * a.t + begin;
        add_mask(o, b, h, 0, begin, end - begin, row);
        float* st = stats + ((b * chunks + c) * a.heads + h) * 2;
        if (chunks > 1) st[0] = max_of(row, end - begin);
        rc.kernels.softmax(row, row, end - begin);
        if (chunks > 1) st[1] = 1.f / max_of(row, end - begin);  // the probability at the maximum, exp(0) / l_c
        std::fill_n(chunks > 1 ? partial + ((b * chunks + c) * a.heads + h) * a.dv : o.y + (b * a.heads + h) * a.dv,
                    a.dv, 0.f);
      }
      for (int64_t j0 = begin; j0 < end; j0 += kBlockRows) {
        const int64_t n = std::min(kBlockRows, end - j0);
        for (int64_t h = 0; h < a.heads; ++h) {
          rc.kernels.sum_rows(scores + (b * a.heads + h) * a.t + j0,
                              o.v + j0 * ldv + (b * a.kv_heads + h / a.group) * a.dv, ldv, n, a.dv, part);
          // One chunk: its softmax is the whole row's, its sum the output.
          float* acc = chunks > 1 ? partial + ((b * chunks + c) * a.heads + h) * a.dv : o.y + (b * a.heads + h) * a.dv;
          for (int64_t e = 0; e < a.dv; ++e) acc[e] += part[e];
        }
      }
    });
    for (int64_t b = 0; b < a.batch && chunks > 1; ++b)
      for (int64_t h = 0; h < a.heads; ++h) {
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < chunks; ++c) top = std::max(top, stats[((b * chunks + c) * a.heads + h) * 2]);
        float* yi = o.y + (b * a.heads + h) * a.dv;
        std::fill_n(yi, a.dv, 0.f);
        float total = 0.f;
        for (int64_t c = 0; c < chunks; ++c) {
          const float* st = stats + ((b * chunks + c) * a.heads + h) * 2;
          if (st[0] == -std::numeric_limits<float>::infinity()) continue;  // every score masked out
          const float w = std::exp(st[0] - top) * st[1];
          const float* pc = partial + ((b * chunks + c) * a.heads + h) * a.dv;
          for (int64_t e = 0; e < a.dv; ++e) yi[e] += w * pc[e];
          total += w;
        }
        const float inv = total > 0.f ? 1.f / total : std::numeric_limits<float>::quiet_NaN();
        for (int64_t e = 0; e < a.dv; ++e) yi[e] *= inv;
      }
  }

  // A cache's shape as [B, Hkv, T, D] whatever its layout.
  Shape batch_first(const Shape& s) const {
    return sequence_first_ && s.size() == 4 ? Shape{s[1], s[2], s[0], s[3]} : s;
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
  bool sequence_first_;
  std::string kernel_;
};

}  // namespace

std::unique_ptr<Op> create_group_attention(const Node& n, const Graph& g) { return std::make_unique<GroupAttention>(n, g); }

}  // namespace optim
