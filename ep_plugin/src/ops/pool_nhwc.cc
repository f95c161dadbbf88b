// Pooling on channels-last tensors ([N, H, W, C] or [N, W, C]), built by the layout rewrite from
// MaxPool (float32, uint8, int8), AveragePool and GlobalAveragePool / GlobalMaxPool (float32), with the
// same attributes and results as pool.cc's NCHW forms. Per output pixel, one pool_window kernel call folds
// the valid taps (whole pixels of contiguous channels) in registers, block of channels by block.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "qgemm.h"
#include "spatial.h"

namespace optim {
namespace {

// Where an NHWC window lands: dims from the channels-last shape.
struct NhwcWindow {
  int64_t n = 1, h = 1, w = 1, c = 1, oh = 1, ow = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t pe_h = 0, pe_w = 0;  // end pads (count_include_pad)

  NhwcWindow(const WindowAttrs& win, const Shape& x) {
    const WindowGeometry geo = resolve_window(win, std::vector<int64_t>(x.begin() + 1, x.end() - 1));
    const bool two_d = win.kernel.size() == 2;
    const size_t last = win.kernel.size() - 1;
    n = x[0];
    c = x.back();
    if (two_d) {
      h = geo.in[0], oh = geo.out[0], kh = win.kernel[0], sh = win.strides[0], dh = win.dilations[0], ph = geo.pad_begin[0];
      pe_h = padded_end(win, geo, 0);
    }
    w = geo.in[last], ow = geo.out[last], kw = win.kernel[last], sw = win.strides[last], dw = win.dilations[last];
    pw = geo.pad_begin[last];
    pe_w = padded_end(win, geo, last);
  }
};

// MaxPool's value for a window with no valid tap (ONNX's reference starts from the lowest value).
template <typename T>
constexpr T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}

template <typename T>
constexpr kernels::PoolOp max_op() {
  if constexpr (std::is_same_v<T, uint8_t>) return kernels::PoolOp::kMaxU8;
  else if constexpr (std::is_same_v<T, int8_t>) return kernels::PoolOp::kMaxS8;
  else return kernels::PoolOp::kMaxF32;
}

// The element offsets (from the image's first value) of a window's valid taps, in (ky, kx) order; returns
// their count.
int64_t window_taps(const NhwcWindow& g, TapRange ry, TapRange rx, int64_t y0, int64_t x0, int64_t* tap) {
  int64_t count = 0;
  for (int64_t ky = ry.begin; ky < ry.end; ++ky)
    for (int64_t kx = rx.begin; kx < rx.end; ++kx) tap[count++] = ((y0 + ky * g.dh) * g.w + x0 + kx * g.dw) * g.c;
  return count;
}

class NhwcPoolImpl : public Op {
 public:
  NhwcPoolImpl(const Node& n, PoolKind kind) : kind_(kind) {
    win_ = read_window_attrs(n, {});
    count_include_pad_ = n.attr_i("count_include_pad", 0) != 0;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() != win_.kernel.size() + 2)
      throw Error("X " + shape_str(x) + " does not match a " + std::to_string(win_.kernel.size()) + "-D window");
    const WindowGeometry geo = resolve_window(win_, std::vector<int64_t>(x.begin() + 1, x.end() - 1));
    Shape out{x[0]};
    out.insert(out.end(), geo.out.begin(), geo.out.end());
    out.push_back(x.back());
    return {out};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    with_pool_type(in[0].dtype, [&](auto t) { run_typed<decltype(t)>(rc, in, out); });
  }

 private:
  template <typename T>
  void run_typed(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const {
    const NhwcWindow g(win_, *in[0].shape);
    if (shape_numel(*out[0].shape) == 0) return;
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    const int64_t pixels = g.n * g.oh * g.ow;
    const int64_t tasks = std::clamp<int64_t>(pixels * g.kh * g.kw * g.c >> 16, 1, std::min<int64_t>(pixels, 64));
    const int64_t per = (pixels + tasks - 1) / tasks;
    rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
      // Room for the valid taps only: a window may be far larger than the input (EfficientNet's 1280 x 1280
      // average over a 7 x 7 map), and no more than h x w of its taps can land inside.
      std::vector<int64_t> tap(static_cast<size_t>(std::min(g.kh, g.h) * std::min(g.kw, g.w)));
      const int64_t m1 = std::min(pixels, (static_cast<int64_t>(t) + 1) * per);
      for (int64_t m = static_cast<int64_t>(t) * per; m < m1; ++m) {
        const int64_t img = m / (g.oh * g.ow), oy = m / g.ow % g.oh, ox = m % g.ow;
        const int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
        const TapRange ry = tap_range(y0, g.dh, g.kh, 0, g.h), rx = tap_range(x0, g.dw, g.kw, 0, g.w);
        const T* xi = x + img * g.h * g.w * g.c;
        T* yp = y + m * g.c;
        const int64_t taps = window_taps(g, ry, rx, y0, x0, tap.data());
        if (kind_ == PoolKind::kMax) {
          if (taps == 0) std::fill(yp, yp + g.c, lowest<T>());  // a window wholly in the padding
          else rc.kernels.pool_window(max_op<T>(), xi, tap.data(), taps, yp, g.c);
        } else if constexpr (std::is_same_v<T, float>) {
          const int64_t count = count_include_pad_
                                    ? tap_range(y0, g.dh, g.kh, -g.ph, g.h + g.pe_h).size() * tap_range(x0, g.dw, g.kw, -g.pw, g.w + g.pe_w).size()
                                    : taps;
          const float divisor = std::max(static_cast<float>(count), 1.f);
          rc.kernels.pool_window(kernels::PoolOp::kSumF32, xi, tap.data(), taps, yp, g.c);
          for (int64_t j = 0; j < g.c; ++j) yp[j] = yp[j] / divisor;
        }
      }
    });
  }

  PoolKind kind_;
  WindowAttrs win_;
  bool count_include_pad_ = false;
};

// GlobalAveragePool / GlobalMaxPool over every spatial position: [N, spatial..., C] -> [N, 1..., C].
class NhwcGlobalPoolImpl : public Op {
 public:
  explicit NhwcGlobalPoolImpl(PoolKind kind) : kind_(kind) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {global_pool_shape(*in[0], true)};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t images = xs[0], c = xs.back();
    if (images * c == 0) return;
    const int64_t area = in[0].numel() / (images * c);
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    if (area == 0) {  // no pixel: the mean of nothing, the max of nothing
      std::fill(y, y + images * c, kind_ == PoolKind::kAverage ? std::numeric_limits<float>::quiet_NaN() : lowest<float>());
      return;
    }
    // Channel blocks over the pool: each task reads its columns of every pixel, kChunk pixels per kernel call
    // (folded in registers), the chunks' sums added in double so that large planes stay accurate.
    constexpr int64_t kBlock = 256, kChunk = 64;
    const int64_t blocks = (c + kBlock - 1) / kBlock;
    const int64_t tasks = std::clamp<int64_t>(images * area * c / kParallelChunk, 1, images * blocks);
    int64_t chunk_taps[kChunk];
    for (int64_t p = 0; p < kChunk; ++p) chunk_taps[p] = p * c;
    rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
      const int64_t per = (images * blocks + tasks - 1) / tasks;
      const int64_t u1 = std::min(images * blocks, (static_cast<int64_t>(t) + 1) * per);
      float part[kBlock];
      double sum[kBlock];
      for (int64_t u = static_cast<int64_t>(t) * per; u < u1; ++u) {
        const int64_t img = u / blocks, c0 = u % blocks * kBlock, n = std::min(c, c0 + kBlock) - c0;
        const float* xi = x + img * area * c + c0;
        float* yo = y + img * c + c0;
        const kernels::PoolOp op = kind_ == PoolKind::kAverage ? kernels::PoolOp::kSumF32 : kernels::PoolOp::kMaxF32;
        for (int64_t p0 = 0; p0 < area; p0 += kChunk) {
          rc.kernels.pool_window(op, xi + p0 * c, chunk_taps, std::min(kChunk, area - p0), p0 ? part : yo, n);
          if (kind_ == PoolKind::kAverage) {
            for (int64_t j = 0; j < n; ++j) sum[j] = p0 ? sum[j] + part[j] : yo[j];
          } else if (p0) {
            for (int64_t j = 0; j < n; ++j) yo[j] = max_nan(yo[j], part[j]);
          }
        }
        if (kind_ == PoolKind::kAverage)
          for (int64_t j = 0; j < n; ++j) yo[j] = static_cast<float>(sum[j] / static_cast<double>(area));
      }
    });
  }

 private:
  PoolKind kind_;
};

// GlobalAveragePool of a DequantizeLinear's output with the DequantizeLinear folded in (rewrites/
// dequantize_pool.cc; inputs 1 and 2: its scale and zero point): each channel's bytes summed exactly in int32,
// then scale * (sum / area - zero), instead of the float copy of the whole map that pool would read (a
// squeeze-excite's pool reads the expanded map of every block).
class NhwcQGlobalAveragePoolImpl : public Op {
 public:
  NhwcQGlobalAveragePoolImpl(const Node& n, const Graph& g)
      : scale_(float_scalar(g, n.inputs[1], "the pooled DequantizeLinear's scale")),
        zero_(zero_point(g, n.has_input(2) ? n.inputs[2] : "")) {
    const ValueInfo* x = g.value(n.inputs[0]);
    if (!x || (x->dtype != DType::kUint8 && x->dtype != DType::kInt8)) throw Error(n.label() + ": x is not uint8/int8");
    signed_ = x->dtype == DType::kInt8;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {global_pool_shape(*in[0], true)}; }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[0].shape;
    const int64_t images = xs[0], c = xs.back();
    if (images * c == 0) return;
    const int64_t area = in[0].numel() / (images * c);
    float* y = out[0].as<float>();
    if (area == 0) {
      std::fill(y, y + images * c, std::numeric_limits<float>::quiet_NaN());
      return;
    }
    // Images over the pool; int32 sums hold 2^23 pixels of 255 (checked: larger maps sum in int64 chunks).
    constexpr int64_t kPixelsPerChunk = int64_t{1} << 23;
    rc.parallel_for(static_cast<size_t>(images), [&](size_t img) {
      std::vector<int32_t> part(static_cast<size_t>(c));
      std::vector<int64_t> sum(static_cast<size_t>(c), 0);
      for (int64_t p0 = 0; p0 < area; p0 += kPixelsPerChunk) {
        std::fill(part.begin(), part.end(), 0);
        const int64_t p1 = std::min(area, p0 + kPixelsPerChunk);
        if (signed_) add_rows(in[0].as<int8_t>() + (static_cast<int64_t>(img) * area + p0) * c, p1 - p0, c, part.data());
        else add_rows(in[0].as<uint8_t>() + (static_cast<int64_t>(img) * area + p0) * c, p1 - p0, c, part.data());
        for (int64_t j = 0; j < c; ++j) sum[static_cast<size_t>(j)] += part[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < c; ++j)
        y[static_cast<int64_t>(img) * c + j] =
            static_cast<float>((static_cast<double>(sum[static_cast<size_t>(j)]) / static_cast<double>(area) - zero_) * scale_);
    });
  }

 private:
  template <typename T>
  static void add_rows(const T* __restrict x, int64_t rows, int64_t c, int32_t* __restrict sum) {
    for (int64_t p = 0; p < rows; ++p, x += c)
      for (int64_t j = 0; j < c; ++j) sum[j] += x[j];
  }
  float scale_;
  int32_t zero_;
  bool signed_ = false;
};

}  // namespace

std::unique_ptr<Op> create_nhwc_maxpool(const Node& n, const Graph&) { return std::make_unique<NhwcPoolImpl>(n, PoolKind::kMax); }
std::unique_ptr<Op> create_nhwc_avgpool(const Node& n, const Graph&) { return std::make_unique<NhwcPoolImpl>(n, PoolKind::kAverage); }
std::unique_ptr<Op> create_nhwc_gap(const Node& n, const Graph& g) {
  if (n.has_input(1)) return std::make_unique<NhwcQGlobalAveragePoolImpl>(n, g);
  return std::make_unique<NhwcGlobalPoolImpl>(PoolKind::kAverage);
}
std::unique_ptr<Op> create_nhwc_gmp(const Node&, const Graph&) { return std::make_unique<NhwcGlobalPoolImpl>(PoolKind::kMax); }

}  // namespace optim
