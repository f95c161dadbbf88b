// Window geometry shared by Conv and pooling: kernel, strides, dilations, pads (explicit or auto_pad),
// resolved against an input's spatial size at run time.
#pragma once

#include <string>
#include <vector>

#include "op.h"

namespace optim {

struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// Reads kernel_shape (or takes `kernel` when given, e.g. from Conv weights), strides, dilations, pads,
// auto_pad, ceil_mode. Throws Error on inconsistent lengths.
WindowAttrs read_window_attrs(const Node& n, const std::vector<int64_t>& kernel);

struct WindowGeometry {
  std::vector<int64_t> in, out, pad_begin;  // per spatial dim
};

// Resolves output sizes and begin pads for spatial input sizes `in`.
WindowGeometry resolve_window(const WindowAttrs& w, const std::vector<int64_t>& in);

// "" when the auto_pad value is one we implement.
std::string check_auto_pad(const Node& n);

}  // namespace optim
