// Pooling on float32 NCHW (1-D and 2-D): MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
#include <algorithm>
#include <limits>

#include "spatial.h"

namespace optim {
namespace {

enum class PoolKind { kMax, kAverage };

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
    const int64_t pe_h = two_d ? padded_end(geo, 0, r) : 0;
    const int64_t pe_w = padded_end(geo, r - 1, r);
    const int64_t planes = xs[0] * xs[1];
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    rc.parallel_for(static_cast<size_t>(planes), [&](size_t pl) {
      const float* xp = x + static_cast<int64_t>(pl) * ih * iw;
      float* yp = y + static_cast<int64_t>(pl) * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t y0 = oy * sh - ph, x0 = ox * sw - pw;
          float acc = kind_ == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
          int64_t count = 0, padded = 0;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = y0 + ky * dh;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = x0 + kx * dw;
              if (iy >= -ph && iy < ih + pe_h && ix >= -pw && ix < iw + pe_w) ++padded;
              if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
              const float v = xp[iy * iw + ix];
              if (kind_ == PoolKind::kMax) acc = (v > acc || v != v) ? v : acc;
              else acc += v;
              ++count;
            }
          }
          if (kind_ == PoolKind::kAverage) acc /= static_cast<float>(count_include_pad_ ? padded : std::max<int64_t>(count, 1));
          yp[oy * ow + ox] = acc;
        }
      }
    });
  }

 private:
  int64_t padded_end(const WindowGeometry& geo, size_t i, size_t r) const {
    if (win_.auto_pad == "VALID") return 0;
    if (win_.auto_pad == "NOTSET") return win_.pads[i + r];
    const int64_t eff = win_.dilations[i] * (win_.kernel[i] - 1) + 1;
    const int64_t total = std::max<int64_t>(0, (geo.out[i] - 1) * win_.strides[i] + eff - geo.in[i]);
    return total - geo.pad_begin[i];
  }

  PoolKind kind_;
  WindowAttrs win_;
  bool count_include_pad_ = false;
};

class GlobalPoolImpl : public Op {
 public:
  explicit GlobalPoolImpl(PoolKind kind) : kind_(kind) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() < 3) throw Error("X " + shape_str(x) + " needs rank >= 3 (N, C, spatial...)");
    Shape out(x.size(), 1);
    out[0] = x[0];
    out[1] = x[1];
    return {out};
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
