// Pooling on float32 NCHW (1-D and 2-D): MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
#include <algorithm>
#include <limits>

#include "spatial.h"

namespace optim {
namespace {

// One kernel tap across a run of output columns: y[i] = max(y[i], x[i*stride]) (or +=). A stride
// known at compile time (SW > 0) lets the compiler vectorize the strided reads.
template <int SW, typename T>
void accumulate_taps(bool is_max, const T* __restrict x, int64_t stride, T* __restrict y,
                     uint8_t* __restrict nan, int64_t n) {
  const int64_t s = SW > 0 ? SW : stride;
  if (is_max) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i * s];
      y[i] = std::max(y[i], v);
      nan[i] |= v != v;  // always false for integer types
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i * s];
  }
}

class PoolImpl : public Op {
 public:
  PoolImpl(const Node& n, PoolKind kind) : kind_(kind) {
    win_ = read_window_attrs(n, {});
    count_include_pad_ = n.attr_i("count_include_pad", 0) != 0;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() != win_.kernel.size() + 2)
      throw Error("X " + shape_str(x) + " does not match a " + std::to_string(win_.kernel.size()) + "-D window");
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(x.begin() + 2, x.end()));
    Shape out{x[0], x[1]};
    out.insert(out.end(), geo.out.begin(), geo.out.end());
    return {out};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    with_pool_type(in[0].dtype, [&](auto t) { run_typed<decltype(t)>(rc, in, out); });
  }

 private:
  template <typename T>
  void run_typed(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const {
    const Shape& xs = *in[0].shape;
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(xs.begin() + 2, xs.end()));
    const bool two_d = geo.in.size() == 2;
    const int64_t ih = two_d ? geo.in[0] : 1, iw = geo.in.back();
    const int64_t oh = two_d ? geo.out[0] : 1, ow = geo.out.back();
    const int64_t kh = two_d ? win_.kernel[0] : 1, kw = win_.kernel.back();
    const int64_t sh = two_d ? win_.strides[0] : 1, sw = win_.strides.back();
    const int64_t dh = two_d ? win_.dilations[0] : 1, dw = win_.dilations.back();
    const int64_t ph = two_d ? geo.pad_begin[0] : 0, pw = geo.pad_begin.back();
    // Padded extent (for count_include_pad): explicit end pads, or what SAME padding implies.
    const size_t r = win_.kernel.size();
    const int64_t pe_h = two_d ? padded_end(win_, geo, 0) : 0;
    const int64_t pe_w = padded_end(win_, geo, r - 1);
    const int64_t planes = xs[0] * xs[1];
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    const bool is_max = kind_ == PoolKind::kMax;
    const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    // Per kernel column kx: the output columns whose tap kx lands inside the input row (integer
    // divisions are slow: do them once here, not per output element).
    std::vector<int64_t> ox_begin(static_cast<size_t>(kw)), ox_end(static_cast<size_t>(kw));
    for (int64_t kx = 0; kx < kw; ++kx) {
      const int64_t off = kx * dw - pw;  // input column of output column ox is ox*sw + off
      ox_begin[kx] = std::min(ow, off >= 0 ? 0 : (-off + sw - 1) / sw);
      ox_end[kx] = std::clamp<int64_t>(off >= iw ? 0 : (iw - off + sw - 1) / sw, ox_begin[kx], ow);
    }
    std::vector<float> cols_in(static_cast<size_t>(ow));  // averaging: taps per output column
    for (int64_t ox = 0; ox < ow && !is_max; ++ox) {
      const int64_t x0 = ox * sw - pw;
      cols_in[ox] = static_cast<float>(count_include_pad_ ? tap_range(x0, dw, kw, -pw, iw + pe_w).size() : tap_range(x0, dw, kw, 0, iw).size());
    }
    // Threads only where the work outweighs waking them (about 64k window taps per task).
    const int64_t tasks = std::clamp<int64_t>(planes * oh * ow * kh * kw >> 16, 1, std::min<int64_t>(planes, 64));
    rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
      const int64_t per = (planes + tasks - 1) / tasks;
      const int64_t pl0 = static_cast<int64_t>(t) * per, pl1 = std::min(planes, pl0 + per);
      std::vector<uint8_t> nan_row(static_cast<size_t>(ow));
      std::vector<T> row_max(is_max ? static_cast<size_t>(iw) : 0);
      for (int64_t pl = pl0; pl < pl1; ++pl) {
        const T* xp = x + pl * ih * iw;
        T* yp = y + pl * oh * ow;
        for (int64_t oy = 0; oy < oh; ++oy) {
          T* yr = yp + oy * ow;
          const int64_t y0 = oy * sh - ph;
          const TapRange ry = tap_range(y0, dh, kh, 0, ih);
          std::fill(yr, yr + ow, is_max ? lowest : T{});
          if (is_max) {  // max of the rows first, then across the columns
            max_rows_then_columns(xp, y0, ry, iw, dh, kw, sw, dw, pw, ox_begin, ox_end, row_max.data(), yr);
            continue;
          }
          std::fill(nan_row.begin(), nan_row.end(), 0);
          // Tap by tap, across the output row: the output columns are independent, so the loop
          // vectorizes and never waits on one running max. NaN is tracked apart so that max
          // propagates it (as ONNX does) without a data-dependent branch.
          for (int64_t ky = ry.begin; ky < ry.end; ++ky) {
            const T* xr = xp + (y0 + ky * dh) * iw;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ox0 = ox_begin[kx], ox1 = ox_end[kx];
              const int64_t first = ox0 * sw + kx * dw - pw;  // input column under output column ox0
              if (ox1 <= ox0) continue;
              if (sw == 1) accumulate_taps<1>(is_max, xr + first, 1, yr + ox0, nan_row.data() + ox0, ox1 - ox0);
              else if (sw == 2) accumulate_taps<2>(is_max, xr + first, 2, yr + ox0, nan_row.data() + ox0, ox1 - ox0);
              else accumulate_taps<0>(is_max, xr + first, sw, yr + ox0, nan_row.data() + ox0, ox1 - ox0);
            }
          }
          if (is_max) {
            if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
              for (int64_t ox = 0; ox < ow; ++ox)
                if (nan_row[static_cast<size_t>(ox)]) yr[ox] = std::numeric_limits<T>::quiet_NaN();
            }
            continue;
          }
          const int64_t rows_in = count_include_pad_ ? tap_range(y0, dh, kh, -ph, ih + pe_h).size() : ry.size();
          for (int64_t ox = 0; ox < ow; ++ox)
            yr[ox] = static_cast<T>(yr[ox] / std::max(static_cast<float>(rows_in) * cols_in[ox], 1.f));
        }
      }
    });
  }

  // MaxPool of one output row: the element-wise max of its input rows (contiguous, so it vectorizes)
  // into row_max, then one strided pass per kernel column instead of one per tap.
  template <typename T>
  static void max_rows_then_columns(const T* xp, int64_t y0, TapRange ry, int64_t iw, int64_t dh, int64_t kw,
                                    int64_t sw, int64_t dw, int64_t pw, const std::vector<int64_t>& ox_begin,
                                    const std::vector<int64_t>& ox_end, T* __restrict row_max, T* __restrict yr) {
    if (ry.size() == 0) return;
    std::copy(xp + (y0 + ry.begin * dh) * iw, xp + (y0 + ry.begin * dh) * iw + iw, row_max);
    for (int64_t ky = ry.begin + 1; ky < ry.end; ++ky) {
      const T* __restrict xr = xp + (y0 + ky * dh) * iw;
      for (int64_t i = 0; i < iw; ++i) row_max[i] = max_nan(row_max[i], xr[i]);
    }
    for (int64_t kx = 0; kx < kw; ++kx) {
      const int64_t ox0 = ox_begin[kx], ox1 = ox_end[kx];
      if (ox1 <= ox0) continue;
      const T* r = row_max + ox0 * sw + kx * dw - pw;
      T* o = yr + ox0;
      const int64_t n = ox1 - ox0;
      if (sw == 1) for (int64_t i = 0; i < n; ++i) o[i] = max_nan(o[i], r[i]);
      else if (sw == 2) for (int64_t i = 0; i < n; ++i) o[i] = max_nan(o[i], r[2 * i]);
      else for (int64_t i = 0; i < n; ++i) o[i] = max_nan(o[i], r[i * sw]);
    }
  }
  PoolKind kind_;
  WindowAttrs win_;
  bool count_include_pad_ = false;
};

class GlobalPoolImpl : public Op {
 public:
  explicit GlobalPoolImpl(PoolKind kind) : kind_(kind) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {global_pool_shape(*in[0], false)};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t planes = xs[0] * xs[1];
    const int64_t area = in[0].numel() / std::max<int64_t>(planes, 1);
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * area;
      if (kind_ == PoolKind::kAverage) {
        double s = 0;  // double keeps large planes accurate
        for (int64_t i = 0; i < area; ++i) s += xp[i];
        y[p] = static_cast<float>(s / static_cast<double>(area));
      } else {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < area; ++i) m = (xp[i] > m || xp[i] != xp[i]) ? xp[i] : m;
        y[p] = m;
      }
    }
    (void)rc;
  }

 private:
  PoolKind kind_;
};

std::string check_pool(const Node& n, const Graph& g) {
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return "MaxPool Indices output is not supported";
  if (n.attr_i("storage_order", 0) != 0) return "MaxPool storage_order=1 is not supported";
  const std::vector<int64_t> k = n.attr_ints("kernel_shape");
  if (k.size() != 1 && k.size() != 2) return "pooling over " + std::to_string(k.size()) + " spatial dims is not supported (1-D and 2-D are)";
  std::string r = check_auto_pad(n);
  if (!r.empty()) return r;
  const ValueInfo* x = g.value(n.inputs[0]);
  const bool quantized = x && (x->dtype == DType::kUint8 || x->dtype == DType::kInt8);
  if (quantized && n.op == "MaxPool" && n.since_version >= 12) return "";  // MaxPool 12 added uint8/int8
  return require_float(g, n, 0);
}

std::string check_global_pool(const Node& n, const Graph& g) { return require_float(g, n, 0); }

std::unique_ptr<Op> create_maxpool(const Node& n, const Graph&) { return std::make_unique<PoolImpl>(n, PoolKind::kMax); }
std::unique_ptr<Op> create_avgpool(const Node& n, const Graph&) { return std::make_unique<PoolImpl>(n, PoolKind::kAverage); }
std::unique_ptr<Op> create_gap(const Node&, const Graph&) { return std::make_unique<GlobalPoolImpl>(PoolKind::kAverage); }
std::unique_ptr<Op> create_gmp(const Node&, const Graph&) { return std::make_unique<GlobalPoolImpl>(PoolKind::kMax); }

}  // namespace

std::vector<OpDef> pool_op_defs() {
  return {
      {"MaxPool", 8, 22, check_pool, create_maxpool},
      {"AveragePool", 7, 22, check_pool, create_avgpool},
      {"GlobalAveragePool", 1, 22, check_global_pool, create_gap},
      {"GlobalMaxPool", 1, 22, check_global_pool, create_gmp},
  };
}

}  // namespace optim
