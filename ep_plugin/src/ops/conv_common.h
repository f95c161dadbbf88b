// What float and integer convolution share: the geometry read from the node and weights, output
// shapes, and im2col written straight into a GEMM's packed-B panels, in chunks of output pixels.
#pragma once

#include <algorithm>
#include <string>

#include "spatial.h"

namespace optim {

struct ConvGeometry {
  Shape wshape;  // [Cout, Cin/group, kH(, kW)]
  size_t spatial = 2;
  WindowAttrs win;
  int64_t group = 1, cout = 0, cin_g = 0;

  ConvGeometry() = default;
  ConvGeometry(const Node& n, Shape weights) : wshape(std::move(weights)) {
    if (wshape.size() != 3 && wshape.size() != 4) throw Error(n.label() + ": weights " + shape_str(wshape) + " are not 1-D or 2-D");
    spatial = wshape.size() - 2;
    std::vector<int64_t> kernel(wshape.begin() + 2, wshape.end());
    if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
      throw Error(n.label() + ": kernel_shape does not match the weights " + shape_str(wshape));
    win = read_window_attrs(n, kernel);
    group = n.attr_i("group", 1);
    cout = wshape[0];
    cin_g = wshape[1];
    if (group <= 0 || cout % group != 0) throw Error(n.label() + ": output channels not divisible by group");
  }

  int64_t k_dim() const {
    int64_t k = cin_g;
    for (size_t i = 0; i < spatial; ++i) k *= wshape[2 + i];
    return k;
  }
  static int64_t spatial_numel(const Shape& s) {
    int64_t n = 1;
    for (size_t i = 2; i < s.size(); ++i) n *= s[i];
    return n;
  }
  Shape output_shape(const Shape& x) const {
    if (x.size() != spatial + 2) throw Error("X " + shape_str(x) + " does not match weights " + shape_str(wshape));
    if (x[1] != cin_g * group)
      throw Error("X " + shape_str(x) + " has " + std::to_string(x[1]) + " channels, weights " + shape_str(wshape) +
                  " with group " + std::to_string(group) + " expect " + std::to_string(cin_g * group));
    const WindowGeometry geo = resolve_window(win, std::vector<int64_t>(x.begin() + 2, x.end()));
    Shape out{x[0], cout};
    out.insert(out.end(), geo.out.begin(), geo.out.end());
    return out;
  }
};

// Work split of a convolution: items are (image, group, chunk of output pixels); each chunk's packed
// im2col panels take about 128 KiB so they are multiplied while still in L2.
struct ConvChunks {
  int64_t panels_per_chunk = 1, chunks = 1, items = 1, slots = 1;
  ConvChunks(int64_t batch_groups, int64_t n_out, int64_t nr, int64_t bytes_per_panel) {
    panels_per_chunk = std::clamp<int64_t>((128 << 10) / std::max<int64_t>(bytes_per_panel, 1), 1, 8);
    const int64_t panels = (n_out + nr - 1) / nr;
    chunks = std::max<int64_t>(1, (panels + panels_per_chunk - 1) / panels_per_chunk);
    items = batch_groups * chunks;
    slots = std::clamp<int64_t>(items, 1, 16);
  }
};

// ceil(a / s) for a >= 0, s >= 1, without a division for s = 1 or 2.
inline int64_t ceil_div(int64_t a, int64_t s) {
  if (s == 1) return a;
  if (s == 2) return (a + 1) >> 1;
  return (a + s - 1) / s;
}

// Writes panels [p0, p1) of one group's im2col matrix (K x OH*OW, K ordered channel, ky, kx) for a
// GEMM's packed B. Element (kk, column j of the panel) goes to row_at(kk) + j * STEP from the panel's
// start; panel_elems is the panel's size; convert(x) is the stored value of input x, and padding
// stores Out{} (the caller's zero: real 0). Pixels of one output row read a strided (contiguous when
// stride is 1) run of one input row, so each run's padding is computed once, not per element.
template <int64_t NR, int64_t STEP, typename In, typename Out, typename RowAt, typename Convert>
void im2col_panels(const In* x, const ConvGeometry& cg, const WindowGeometry& geo, int64_t p0, int64_t p1, int64_t n_out,
                   Out* dst, int64_t panel_elems, RowAt row_at, Convert convert) {
  constexpr int64_t step = STEP;
  const bool two_d = cg.spatial == 2;
  const size_t last = cg.spatial - 1;
  const int64_t ih = two_d ? geo.in[0] : 1, iw = geo.in[last];
  const int64_t ow = geo.out[last];
  const int64_t kh = two_d ? cg.win.kernel[0] : 1, kw = cg.win.kernel[last];
  const int64_t sh = two_d ? cg.win.strides[0] : 1, sw = cg.win.strides[last];
  const int64_t dh = two_d ? cg.win.dilations[0] : 1, dw = cg.win.dilations[last];
  const int64_t ph = two_d ? geo.pad_begin[0] : 0, pw = geo.pad_begin[last];
  struct Run { int64_t col, len, oy, ox; };
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j0 = p * NR;
    const int64_t cols = std::min(NR, n_out - j0);
    Run runs[NR];
    int64_t n_runs = 0;
    for (int64_t j = 0; j < cols;) {  // (a division per run, not per element)
      const int64_t oy = (j0 + j) / ow, ox = (j0 + j) - oy * ow;
      const int64_t len = std::min(cols - j, ow - ox);
      runs[n_runs++] = {j, len, oy, ox};
      j += len;
    }
    Out* panel = dst + (p - p0) * panel_elems;
    int64_t kk = 0;
    for (int64_t c = 0; c < cg.cin_g; ++c) {
      const In* xc = x + c * ih * iw;
      for (int64_t ky = 0; ky < kh; ++ky) {
        for (int64_t kx = 0; kx < kw; ++kx, ++kk) {
          const int64_t row = row_at(kk);
          for (int64_t r = 0; r < n_runs; ++r) {
            const Run& run = runs[r];
            Out* o = panel + row + run.col * step;
            const int64_t iy = run.oy * sh - ph + ky * dh;
            if (iy < 0 || iy >= ih) {
              for (int64_t t = 0; t < run.len; ++t) o[t * step] = Out{};
              continue;
            }
            const In* xr = xc + iy * iw;
            const int64_t ix0 = run.ox * sw - pw + kx * dw;  // input column of the run's first pixel
            // Valid t: 0 <= ix0 + t*sw < iw. (Division is slow and this runs per k row and run: the
            // usual strides 1 and 2 avoid it.)
            const int64_t t_lo = ix0 >= 0 ? 0 : std::min(run.len, ceil_div(-ix0, sw));
            const int64_t t_hi = ix0 >= iw ? 0 : std::clamp<int64_t>(ceil_div(iw - ix0, sw), t_lo, run.len);
            for (int64_t t = 0; t < t_lo; ++t) o[t * step] = Out{};
            for (int64_t t = t_lo; t < t_hi; ++t) o[t * step] = convert(xr[ix0 + t * sw]);
            for (int64_t t = t_hi; t < run.len; ++t) o[t * step] = Out{};
          }
          for (int64_t j = cols; j < NR; ++j) panel[row + j * step] = Out{};
        }
      }
    }
  }
}

}  // namespace optim
