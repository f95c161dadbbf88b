// ConvTranspose (opsets 1-22; float32, 1-D and 2-D): per image and group, a GEMM of the transposed weights
// [Cout/g * kh * kw, Cin/g] by the input's pixels [Cin/g, pixels] (the SGEMM kernels; the input packed once as
// B) gives every output tap of every input pixel; col2im then adds each into the output, which starts as the
// bias. Strides, dilations, pads, auto_pad, output_padding, output_shape and groups are resolved as ONNX Runtime
// does (an odd total pad puts its extra element at the end for SAME_UPPER, at the start otherwise), with its
// checks. Tasks are (image-group, block of output channels): each multiplies its own rows of A, block of pixels
// by block of pixels, and scatters into its own output channels, so tasks never write the same element.
#include <algorithm>

#include "spatial.h"

namespace optim {
namespace {

// A task's C block (its rows x a block of pixels) stays within this many floats.
constexpr int64_t kColBlockFloats = 1 << 16;
// Tasks run concurrently in at most this many slots, each with its own C block in scratch.
constexpr int64_t kMaxSlots = 16;
// Tasks to aim for per run (enough to keep a pool busy), and the fewest GEMM rows worth a task of their own.
constexpr int64_t kTargetTasks = 16;
constexpr int64_t kMinTaskRows = 32;

int64_t align16(int64_t floats) { return (floats + 15) / 16 * 16; }

// Everything one run needs, from the input and weight shapes; 1-D runs as 2-D with a height of 1.
struct Geometry {
  int64_t n = 0, cin = 0, cin_g = 0, cout = 0, cout_g = 0, group = 1;
  int64_t h = 1, w = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, oh = 1, ow = 1;
  bool one_d = false;
  int64_t taps() const { return kh * kw; }
  int64_t m() const { return cout_g * taps(); }  // GEMM rows: (output channel, tap)
  int64_t pixels() const { return h * w; }
  Shape out_shape() const { return one_d ? Shape{n, cout, ow} : Shape{n, cout, oh, ow}; }
};

// How a run is split: tasks of (image-group, `chunk` output channels), `slots` of them at once, blocks of
// `block` pixels (a multiple of the B panel width unless it is all of them); where scratch puts what.
struct Work {
  int64_t items = 0, chunks = 1, chunk = 1, tasks = 0, slots = 1, block = 1;
  int64_t packed_item = 0, col_floats = 0;  // floats: one item's packed input, one slot's C block
  explicit Work(const Geometry& g) {
    items = g.n * g.group;
    const int64_t by_rows = std::max<int64_t>(1, g.m() / kMinTaskRows);
    chunks = std::max<int64_t>(1, std::min({g.cout_g, by_rows, (kTargetTasks + items - 1) / std::max<int64_t>(1, items)}));
    chunk = (g.cout_g + chunks - 1) / chunks;
    chunks = g.cout_g ? (g.cout_g + chunk - 1) / chunk : 1;
    tasks = items * chunks;
    slots = std::max<int64_t>(1, std::min(tasks, kMaxSlots));
    const int64_t rows = chunk * g.taps();
    const int64_t nr = kernels::kSgemmNR;
    block = std::max<int64_t>(1, std::min(g.pixels(), std::max(nr, kColBlockFloats / std::max<int64_t>(1, rows) / nr * nr)));
    packed_item = align16(static_cast<int64_t>(kernels::sgemm_packed_b_floats(g.cin_g, g.pixels())));
    col_floats = align16(rows * block);
  }
};

struct Attrs {
  std::vector<int64_t> kernel, strides, dilations, pads, output_padding, output_shape;
  std::string auto_pad = "NOTSET";
  int64_t group = 1;
};

// ONNX Runtime's ComputeTransposePadAndOutputShape for one spatial dim: the begin pad and the output size.
void resolve_dim(const Attrs& a, size_t d, size_t rank, int64_t in, int64_t k, int64_t* pad_begin, int64_t* out) {
  const int64_t s = a.strides.empty() ? 1 : a.strides[d], dil = a.dilations.empty() ? 1 : a.dilations[d];
  const int64_t adj = a.output_padding.empty() ? 0 : a.output_padding[d];
  int64_t head = a.pads.empty() ? 0 : a.pads[d], tail = a.pads.empty() ? 0 : a.pads[d + rank];
  // The output with no padding (attributes from the model are checked for overflow here, in 128 bits).
  const __int128 full_wide = static_cast<__int128>(in - 1) * s + adj + static_cast<__int128>(k - 1) * dil + 1;
  if (full_wide > (int64_t{1} << 62) || full_wide < -(int64_t{1} << 62))
    throw Error("ConvTranspose output size along spatial dim " + std::to_string(d) + " is too large");
  const int64_t full = static_cast<int64_t>(full_wide);
  auto distribute = [&](int64_t total) {
    head = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    tail = total - head;
  };
  const std::string where = " along spatial dim " + std::to_string(d);
  if (!a.output_shape.empty()) {
    *out = a.output_shape.size() == rank ? a.output_shape[d] : a.output_shape[d + 2];
    if (*out <= 0) throw Error("ConvTranspose output_shape " + std::to_string(*out) + where + " is not positive");
    distribute(std::max<int64_t>(0, full - *out));
  } else {
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER")
      distribute(static_cast<int64_t>(std::max<__int128>(0, full - static_cast<__int128>(in) * s)));
    if (head > full || tail > full) throw Error("ConvTranspose pads" + where + " are larger than the output");
    *out = full - head - tail;
  }
  *pad_begin = head;
  if (*out <= 0) throw Error("ConvTranspose output size " + std::to_string(*out) + where + " is not positive");
  // ONNX Runtime's checks: output_padding below max(stride, dilation), and the convolution this one transposes
  // taking the output back to the input's size.
  if (adj < 0 || adj >= std::max(s, dil))
    throw Error("output_padding " + std::to_string(adj) + where + " is not below max(stride, dilation) " +
                std::to_string(std::max(s, dil)));
  if ((*out + head + tail - (k - 1) * dil - 1) / s + 1 != in)
    throw Error("output size " + std::to_string(*out) + where + " does not come from input size " + std::to_string(in) +
                " (output_padding " + std::to_string(adj) + ", stride " + std::to_string(s) + ")");
}

class ConvTransposeImpl : public Op {
 public:
  ConvTransposeImpl(Attrs a, const Tensor* w) : a_(std::move(a)) {
    // Constant weights: transposed once into the GEMM's A layout (bad shapes are reported by infer).
    if (!w || w->bytes.empty() || w->shape.size() < 3 || a_.group <= 0 || w->shape[0] % a_.group != 0) return;
    a_packed_.resize(static_cast<size_t>(shape_numel(w->shape)));
    transpose_weights(w->shape, a_.group, w->data<float>(), a_packed_.data());
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Geometry g = geometry(*in[0], *in[1]);
    if (in.size() > 2 && in[2] && shape_numel(*in[2]) != g.cout)
      throw Error("B " + shape_str(*in[2]) + " does not have " + std::to_string(g.cout) + " elements");
    return {g.out_shape()};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const Geometry g = geometry(*in[0], *in[1]);
    const Work w(g);
    const int64_t weights = a_packed_.empty() ? align16(shape_numel(*in[1])) : 0;
    return static_cast<size_t>(weights + w.items * w.packed_item + w.slots * w.col_floats) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Geometry g = geometry(*in[0].shape, *in[1].shape);
    const Work w(g);
    if (w.items == 0 || g.cout_g == 0) return;
    const float* bias = in.size() > 2 && in[2].present() ? in[2].as<float>() : nullptr;
    float* scratch = static_cast<float*>(rc.scratch());
    const float* a = a_packed_.data();
    if (a_packed_.empty()) {
      transpose_weights(*in[1].shape, g.group, in[1].as<float>(), scratch);
      a = scratch;
      scratch += align16(in[1].numel());
    }
    float* packed = scratch;
    float* cols = packed + w.items * w.packed_item;
    pack_inputs(rc, g, w, in[0].as<float>(), packed);
    float* y = out[0].as<float>();
    rc.parallel_for(static_cast<size_t>(w.slots), [&](size_t slot) {
      for (int64_t t = static_cast<int64_t>(slot); t < w.tasks; t += w.slots)
        run_task(rc, g, w, t, a, packed, bias, cols + static_cast<int64_t>(slot) * w.col_floats, y);
    });
  }

 private:
  Geometry geometry(const Shape& xs, const Shape& ws) const {
    if (xs.size() != ws.size() || (xs.size() != 3 && xs.size() != 4))
      throw Error("X " + shape_str(xs) + " and W " + shape_str(ws) + " are not both 3-D or both 4-D");
    Geometry g;
    const size_t rank = xs.size() - 2;
    g.one_d = rank == 1;
    g.group = a_.group;
    g.n = xs[0];
    g.cin = xs[1];
    if (ws[0] != g.cin)
      throw Error("W " + shape_str(ws) + " does not have the " + std::to_string(g.cin) + " input channels of X " + shape_str(xs));
    if (g.group <= 0 || g.cin % g.group != 0)
      throw Error("input channels " + std::to_string(g.cin) + " do not split into " + std::to_string(g.group) + " groups");
    g.cin_g = g.cin / g.group;
    g.cout_g = ws[1];
    g.cout = g.cout_g * g.group;
    for (size_t d = 0; d < rank; ++d)
      if (!a_.kernel.empty() && a_.kernel[d] != ws[2 + d])
        throw Error("kernel_shape does not match W " + shape_str(ws));
    int64_t* in_dims[2] = {&g.h, &g.w};
    int64_t* k_dims[2] = {&g.kh, &g.kw};
    int64_t* s_dims[2] = {&g.sh, &g.sw};
    int64_t* d_dims[2] = {&g.dh, &g.dw};
    int64_t* p_dims[2] = {&g.pt, &g.pl};
    int64_t* o_dims[2] = {&g.oh, &g.ow};
    const size_t first = g.one_d ? 1 : 0;  // 1-D fills the width
    for (size_t d = 0; d < rank; ++d) {
      const size_t at = first + d;
      *in_dims[at] = xs[2 + d];
      *k_dims[at] = ws[2 + d];
      *s_dims[at] = a_.strides.empty() ? 1 : a_.strides[d];
      *d_dims[at] = a_.dilations.empty() ? 1 : a_.dilations[d];
      if (*s_dims[at] <= 0 || *d_dims[at] <= 0) throw Error("strides and dilations must be positive");
      resolve_dim(a_, d, rank, xs[2 + d], ws[2 + d], p_dims[at], o_dims[at]);
    }
    return g;
  }

  // A[g][(co * taps + t) * cin_g + ci] = W[g * cin_g + ci][co][t], for W [cin, cout_g, taps...].
  static void transpose_weights(const Shape& ws, int64_t group, const float* w, float* a) {
    const int64_t cin_g = ws[0] / group, cout_g = ws[1];
    int64_t taps = 1;
    for (size_t d = 2; d < ws.size(); ++d) taps *= ws[d];
    const int64_t m = cout_g * taps;
    for (int64_t grp = 0; grp < group; ++grp)
      for (int64_t ci = 0; ci < cin_g; ++ci)
        for (int64_t co = 0; co < cout_g; ++co)
          for (int64_t t = 0; t < taps; ++t)
            a[(grp * m + co * taps + t) * cin_g + ci] = w[((grp * cin_g + ci) * cout_g + co) * taps + t];
  }

  // Each item's input [cin_g, pixels] packed as the GEMM's B, panel by panel over the pool.
  static void pack_inputs(const RunContext& rc, const Geometry& g, const Work& w, const float* x, float* packed) {
    const int64_t hw = g.pixels(), panels = (hw + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
    parallel_rows(rc, w.items * panels, g.cin_g * kernels::kSgemmNR, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t item = r / panels, p = r % panels, j0 = p * kernels::kSgemmNR;
        const float* xi = x + ((item / g.group) * g.cin + (item % g.group) * g.cin_g) * hw;
        kernels::sgemm_pack_b(xi + j0, hw, false, g.cin_g, std::min(kernels::kSgemmNR, hw - j0),
                              packed + item * w.packed_item + p * g.cin_g * kernels::kSgemmNR);
      }
    });
  }

  // Task t: output channels [co0, co1) of one image and group start as the bias; then, block by block of input
  // pixels, their rows of A times the packed input, scattered into those channels.
  static void run_task(const RunContext& rc, const Geometry& g, const Work& w, int64_t t, const float* a, const float* packed,
                       const float* bias, float* col, float* y) {
    const int64_t item = t / w.chunks, co0 = (t % w.chunks) * w.chunk, co1 = std::min(g.cout_g, co0 + w.chunk);
    const int64_t img = item / g.group, grp = item % g.group;
    const int64_t hw = g.pixels(), ohw = g.oh * g.ow;
    float* yi = y + (img * g.cout + grp * g.cout_g) * ohw;
    for (int64_t co = co0; co < co1; ++co) std::fill(yi + co * ohw, yi + (co + 1) * ohw, bias ? bias[grp * g.cout_g + co] : 0.f);
    if (g.cin_g == 0) return;
    const int64_t rows = (co1 - co0) * g.taps();
    const float* ag = a + (grp * g.m() + co0 * g.taps()) * g.cin_g;
    const float* bi = packed + item * w.packed_item;
    const kernels::SgemmEpilogue ep;
    for (int64_t p0 = 0; p0 < hw; p0 += w.block) {
      const int64_t n = std::min(w.block, hw - p0);
      const int64_t panels = (n + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
      rc.kernels.sgemm(0, rows, 0, panels, n, g.cin_g, ag, g.cin_g, bi + p0 * g.cin_g, col, n, ep);
      col2im(rc, g, col, p0, n, co0, co1, yi);
    }
  }

  // Adds C (rows: output channels [co0, co1) by taps; columns: input pixels [p0, p0 + cols)) into the output.
  static void col2im(const RunContext& rc, const Geometry& g, const float* col, int64_t p0, int64_t cols, int64_t co0, int64_t co1,
                     float* yi) {
    const int64_t taps = g.taps(), ohw = g.oh * g.ow;
    const int64_t iy_first = p0 / g.w, iy_last = (p0 + cols - 1) / g.w;
    for (int64_t co = co0; co < co1; ++co) {
      float* yc = yi + co * ohw;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        // Input rows (of this block) and columns whose output row / column lies inside the output.
        const int64_t oy_off = ky * g.dh - g.pt;
        const TapRange rows = tap_range(oy_off, g.sh, g.h, 0, g.oh);
        const int64_t iy0 = std::max(rows.begin, iy_first), iy1 = std::min(rows.end, iy_last + 1);
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const float* crow = col + ((co - co0) * taps + ky * g.kw + kx) * cols;  // column j: input pixel p0 + j
          const int64_t ox_off = kx * g.dw - g.pl;
          const TapRange columns = tap_range(ox_off, g.sw, g.w, 0, g.ow);
          for (int64_t iy = iy0; iy < iy1; ++iy) {
            const int64_t row_p = iy * g.w;  // pixel index of (iy, 0)
            const int64_t b = std::max(columns.begin, p0 - row_p), e = std::min(columns.end, p0 + cols - row_p);
            if (b < e)
              rc.kernels.col2im_row(crow + (row_p + b - p0), yc + (iy * g.sh + oy_off) * g.ow + b * g.sw + ox_off, g.sw, e - b);
          }
        }
      }
    }
  }

  Attrs a_;
  std::vector<float> a_packed_;  // constant weights in A's layout, else empty
};

std::string check_conv_transpose(const Node& n, const Graph& g) {
  std::string r = require_float_inputs(g, n);
  if (!r.empty()) return r;
  const ValueInfo* w = g.value(n.inputs[1]);
  if (!w || !w->has_shape || (w->shape.size() != 3 && w->shape.size() != 4)) {
    if (w && w->has_shape && w->shape.size() > 4)
      return "ConvTranspose over " + std::to_string(w->shape.size() - 2) + " spatial dims is not supported (1-D and 2-D are)";
    return "ConvTranspose weights of unknown or unsupported rank";
  }
  const size_t rank = w->shape.size() - 2;
  r = check_auto_pad(n);
  if (!r.empty()) return r;
  if (n.attr_i("group", 1) < 1) return "ConvTranspose group must be at least 1";
  for (int64_t p : n.attr_ints("pads"))
    if (p < 0) return "ConvTranspose with negative pads is not supported";
  // Attribute lengths: per spatial dim, pads twice that, output_shape with or without N and C.
  for (const char* name : {"kernel_shape", "strides", "dilations", "output_padding", "pads", "output_shape"}) {
    const size_t len = n.attr_ints(name).size(), per_dim = std::string(name) == "pads" ? 2 * rank : rank;
    if (len != 0 && len != per_dim && !(std::string(name) == "output_shape" && len == rank + 2))
      return std::string("ConvTranspose ") + name + " has " + std::to_string(len) + " values for " + std::to_string(rank) + " spatial dims";
  }
  return "";
}

std::unique_ptr<Op> create_conv_transpose(const Node& n, const Graph& g) {
  Attrs a;
  a.kernel = n.attr_ints("kernel_shape");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.pads = n.attr_ints("pads");
  a.output_padding = n.attr_ints("output_padding");
  a.output_shape = n.attr_ints("output_shape");
  a.auto_pad = n.attr_s("auto_pad", "NOTSET");
  a.group = n.attr_i("group", 1);
  return std::make_unique<ConvTransposeImpl>(std::move(a), g.constant(n.inputs[1]));
}

}  // namespace

std::vector<OpDef> conv_transpose_op_defs() {
  // Version 22 adds bfloat16 only.
  return {{"ConvTranspose", 1, 22, check_conv_transpose, create_conv_transpose}};
}

}  // namespace optim
