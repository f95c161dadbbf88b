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

// The end pad of spatial dim i: explicit, or what SAME padding implies (for count_include_pad).
int64_t padded_end(const WindowAttrs& w, const WindowGeometry& geo, size_t i);

// Kernel taps t in [begin, end) of [0, k): those whose position start + t*dil lies in [lo, hi).
struct TapRange {
  int64_t begin, end;
  int64_t size() const { return end > begin ? end - begin : 0; }
};
TapRange tap_range(int64_t start, int64_t dil, int64_t k, int64_t lo, int64_t hi);

// max(acc, v) that propagates NaN as ONNX's MaxPool does (a NaN anywhere in the window wins), with
// std::max's tie order; a select the compiler vectorizes. For integers the NaN test is always false.
template <typename T>
inline T max_nan(T acc, T v) { return (acc < v || v != v) ? v : acc; }

// Which pool: the largest value of a window or its mean (pool.cc's NCHW and pool_nhwc.cc's channels-last forms).
enum class PoolKind { kMax, kAverage };

// A global pool's output shape: ones but for the batch dim and the channels (dim 1, or the last one when
// channels_last).
inline Shape global_pool_shape(const Shape& x, bool channels_last) {
  if (x.size() < 3)
    throw Error("X " + shape_str(x) + " needs rank >= 3 " + (channels_last ? "(N, spatial..., C)" : "(N, C, spatial...)"));
  Shape out(x.size(), 1);
  out[0] = x[0];
  const size_t c = channels_last ? x.size() - 1 : 1;
  out[c] = x[c];
  return out;
}

// Calls run(T{}) with T the element type of a pool's input: uint8 or int8 (MaxPool on quantized tensors; the
// checks allow nothing else) or float.
template <typename Run>
void with_pool_type(DType t, Run&& run) {
  switch (t) {
    case DType::kUint8: return run(uint8_t{});
    case DType::kInt8: return run(int8_t{});
    default: return run(float{});
  }
}

// "" when the auto_pad value is one we implement.
std::string check_auto_pad(const Node& n);

}  // namespace optim
