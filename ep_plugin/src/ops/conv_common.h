// What float and integer convolution share: the geometry read from the node and weights, and output
// shapes (their direct convolution is conv_direct.h).
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

  // A 2-D 1x1 convolution of one group, stride 1 and no padding: a GEMM over pixels (what the folds into a
  // convolution need: rewrites/depthwise_pointwise.cc, channel_scales.cc).
  bool is_pointwise() const {
    return spatial == 2 && group == 1 && wshape[2] == 1 && wshape[3] == 1 && win.strides == std::vector<int64_t>{1, 1} &&
           win.pads == std::vector<int64_t>{0, 0, 0, 0};
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

// The window of a 1-D or 2-D convolution over one input size as its kernels index it (1-D: one row, h = oh = kh =
// 1): input and output rows and columns, kernel, strides, dilations, leading padding, and the padded rows and
// columns some output pixel reads (hp, wp). What the direct (conv_direct.h) and channels-last (conv_nhwc.h)
// layouts build on.
struct ConvWindow {
  int64_t h = 1, w = 1, oh = 1, ow = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t hp = 1, wp = 1;

  ConvWindow(const ConvGeometry& cg, const std::vector<int64_t>& spatial_in) {
    const WindowGeometry geo = resolve_window(cg.win, spatial_in);
    const size_t last = cg.spatial - 1;
    if (cg.spatial == 2) {
      h = geo.in[0], oh = geo.out[0], kh = cg.win.kernel[0], sh = cg.win.strides[0], dh = cg.win.dilations[0];
      ph = geo.pad_begin[0];
    }
    w = geo.in[last], ow = geo.out[last], kw = cg.win.kernel[last], sw = cg.win.strides[last];
    dw = cg.win.dilations[last], pw = geo.pad_begin[last];
    hp = std::max<int64_t>(1, (oh - 1) * sh + (kh - 1) * dh + 1);
    wp = std::max<int64_t>(1, (ow - 1) * sw + (kw - 1) * dw + 1);
  }
};

// ceil(a / s) for a >= 0, s >= 1, without a division for s = 1 or 2.
inline int64_t ceil_div(int64_t a, int64_t s) {
  if (s == 1) return a;
  if (s == 2) return (a + 1) >> 1;
  return (a + s - 1) / s;
}

}  // namespace optim
