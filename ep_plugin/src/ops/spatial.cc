#include "spatial.h"

#include <algorithm>

namespace optim {

WindowAttrs read_window_attrs(const Node& n, const std::vector<int64_t>& kernel) {
  WindowAttrs w;
  w.kernel = kernel.empty() ? n.attr_ints("kernel_shape") : kernel;
  const size_t r = w.kernel.size();
  w.strides = n.attr_ints("strides", std::vector<int64_t>(r, 1));
  w.dilations = n.attr_ints("dilations", std::vector<int64_t>(r, 1));
  w.pads = n.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  w.auto_pad = n.attr_s("auto_pad", "NOTSET");
  w.ceil_mode = n.attr_i("ceil_mode", 0) != 0;
  if (w.strides.size() != r || w.dilations.size() != r || w.pads.size() != 2 * r)
    throw Error(n.label() + ": strides/dilations/pads lengths do not match kernel rank " + std::to_string(r));
  for (size_t i = 0; i < r; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0)
      throw Error(n.label() + ": kernel, strides and dilations must be positive");
    if (w.pads[i] < 0 || w.pads[i + r] < 0) throw Error(n.label() + ": negative pads are not supported");
  }
  return w;
}

WindowGeometry resolve_window(const WindowAttrs& w, const std::vector<int64_t>& in) {
  const size_t r = w.kernel.size();
  if (in.size() != r)
    throw Error("input has " + std::to_string(in.size()) + " spatial dims but the window has " + std::to_string(r));
  WindowGeometry g;
  g.in = in;
  g.out.resize(r);
  g.pad_begin.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - in[i]);
      g.pad_begin[i] = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.out[i] = out;
      continue;
    }
    const int64_t pb = w.auto_pad == "VALID" ? 0 : w.pads[i];
    const int64_t pe = w.auto_pad == "VALID" ? 0 : w.pads[i + r];
    const int64_t span = in[i] + pb + pe - eff;
    // With ceil_mode a window larger than the input still gives ceil(span / stride) + 1 windows (ONNX Runtime's
    // rule; transformers' EfficientNet pools 7x7 with a 1280 window), each clipped to the input.
    if (span < 0 && !(w.ceil_mode && -span < w.strides[i]))
      throw Error("window " + std::to_string(eff) + " is larger than the padded input " + std::to_string(in[i] + pb + pe));
    int64_t out = span < 0 ? 1 : (w.ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
    // With ceil_mode, the last window must start inside the input or left padding (ONNX rule).
    if (w.ceil_mode && (out - 1) * w.strides[i] >= in[i] + pb) --out;
    g.pad_begin[i] = pb;
    g.out[i] = out;
  }
  return g;
}

int64_t padded_end(const WindowAttrs& w, const WindowGeometry& geo, size_t i) {
  const size_t r = w.kernel.size();
  if (w.auto_pad == "VALID") return 0;
  if (w.auto_pad == "NOTSET") return w.pads[i + r];
  const int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
  const int64_t total = std::max<int64_t>(0, (geo.out[i] - 1) * w.strides[i] + eff - geo.in[i]);
  return total - geo.pad_begin[i];
}

TapRange tap_range(int64_t start, int64_t dil, int64_t k, int64_t lo, int64_t hi) {
  const int64_t b = start >= lo ? 0 : (lo - start + dil - 1) / dil;
  const int64_t e = start >= hi ? 0 : (hi - start + dil - 1) / dil;
  return {std::min(b, k), std::clamp<int64_t>(e, 0, k)};
}

std::string check_auto_pad(const Node& n) {
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER") return "";
  return "auto_pad '" + ap + "' is not supported";
}

}  // namespace optim
