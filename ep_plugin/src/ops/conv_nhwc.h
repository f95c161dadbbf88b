// What the NHWC convolutions (conv_nhwc_op.cc: float32, qconv_nhwc.cc: int8) share (defined in conv_nhwc.cc).
// Inside a partition the layout rewrite (rewrites/channels_last.cc) hands them channels-last tensors, [N, H, W, C] (1-D: [N, W, C]),
// and they run as a GEMM whose rows are output pixels and whose columns are output channels
// (kernel_table.h, ConvRows): per kernel tap, each pixel reads its input pixel's channels, which are
// contiguous. The input is read where it lies when no padding is read and its channels fit the kernel;
// otherwise it is first copied once, per image and group, into a padded buffer (rows, columns and channels
// padded). Depthwise convolutions read the input where it lies and skip padding taps.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "conv_common.h"

namespace optim {

// NHWC output shape of a Conv with this geometry on NHWC input x; throws Error on a mismatch.
Shape nhwc_conv_output_shape(const ConvGeometry& cg, const Shape& x);

// One NHWC convolution's geometry for one input shape, and where its (prepared) input lies.
struct NhwcConvLayout : ConvWindow {
  int64_t n = 1, c = 1;
  bool reads_padding = false;

  NhwcConvLayout(const ConvGeometry& cg, const Shape& x);
  int64_t pixels() const { return oh * ow; }
  // Prepared input rows that `out_rows` consecutive output rows read (a band of them).
  int64_t rows_read(int64_t out_rows) const { return (out_rows - 1) * sh + (kh - 1) * dh + 1; }
  // Elements of one prepared (image, group) with kt values per pixel.
  int64_t prepared_elems(int64_t kt) const { return hp * wp * kt; }
  // How a pixel reads its window from an input of `cs` values per pixel (kt of them used) in rows of
  // `row_pixels` pixels: one run of kt values per kernel tap, or, when the input holds exactly kt values
  // per pixel and the kernel is not dilated along the row, one run of kw * kt values per kernel row (the
  // row's taps are then adjacent: fewer, longer runs for the kernels). The weights' K order is the same.
  struct Taps {
    int64_t count = 1, k_tap = 1;
    std::vector<int64_t> offsets;  // elements from the pixel's first value, per run
  };
  Taps taps(int64_t cs, int64_t kt, int64_t row_pixels) const;
  kernels::DwconvGeometry depthwise(int64_t channels) const;
};

// The identity conversion: the prepared input holds the input's own values (a row then copies at once).
struct CopyValue {
  template <typename T>
  T operator()(T v) const { return v; }
};

// Rows [r0, r1) of a prepared input (dst holds them from dst_row0 on: 0, the whole prepared image; r0, a band of
// rows), kt slots a pixel: rows and columns of padding hold `pad`, and so do the slots past cin of every pixel
// when cin < kt; interior(iy, ix, pixels, out) writes the `pixels` input pixels of row iy from column ix on.
template <typename Out, typename Interior>
void prepare_rows_by(const NhwcConvLayout& l, int64_t cin, int64_t kt, Out* dst, Out pad, int64_t r0, int64_t r1,
                     int64_t dst_row0, Interior interior) {
  const int64_t col_lo = std::min(l.wp, l.pw), col_hi = std::clamp<int64_t>(l.pw + l.w, col_lo, l.wp);
  for (int64_t r = r0; r < r1; ++r) {
    Out* row = dst + (r - dst_row0) * l.wp * kt;
    const int64_t iy = r - l.ph;
    if (iy < 0 || iy >= l.h) {
      std::fill(row, row + l.wp * kt, pad);
      continue;
    }
    // Channels padded (cin < kt): the whole row padded first, one fill, rather than kt - cin values per pixel
    // (a loop the compiler makes a memset call per pixel: 400K calls for a batch of 8 stems).
    if (cin < kt) {
      std::fill(row, row + l.wp * kt, pad);
    } else {
      std::fill(row, row + col_lo * kt, pad);
      std::fill(row + col_hi * kt, row + l.wp * kt, pad);
    }
    if (col_hi > col_lo) interior(iy, col_lo - l.pw, col_hi - col_lo, row + col_lo * kt);
  }
}

// Copies rows [r0, r1) of the prepared input of one (image, group) from x, the group's first value, whose
// strides in elements are `row_step` between input rows, `pixel_step` between pixels of a row and
// `channel_step` between a pixel's channels; each pixel gets kt >= cin slots; padding pixels and the slots past
// cin hold `pad`. convert(x) gives the stored value of an input.
template <typename T, typename Out, typename Convert>
void prepare_rows(const NhwcConvLayout& l, const T* x, int64_t row_step, int64_t pixel_step, int64_t channel_step,
                  int64_t cin, int64_t kt, Out* dst, Out pad, Convert convert, int64_t r0, int64_t r1, int64_t dst_row0 = 0) {
  prepare_rows_by(l, cin, kt, dst, pad, r0, r1, dst_row0, [&](int64_t iy, int64_t ix, int64_t cols, Out* out) {
    const T* src = x + iy * row_step + ix * pixel_step;
    if constexpr (std::is_same_v<T, Out> && std::is_same_v<Convert, CopyValue>) {
      if (cin == kt && cin == pixel_step && channel_step == 1) {
        std::memcpy(out, src, static_cast<size_t>(cols * cin) * sizeof(T));
        return;
      }
    }
    for (int64_t px = 0; px < cols; ++px, src += pixel_step, out += kt)
      for (int64_t c = 0; c < cin; ++c) out[c] = convert(src[c * channel_step]);
  });
}

// From a channels-last image x_img: channels [c0, c0 + cin) of c_total.
template <typename T, typename Out, typename Convert>
void prepare_nhwc_rows(const NhwcConvLayout& l, const T* x_img, int64_t c_total, int64_t c0, int64_t cin, int64_t kt,
                       Out* dst, Out pad, Convert convert, int64_t r0, int64_t r1, int64_t dst_row0 = 0) {
  prepare_rows(l, x_img + c0, l.w * c_total, c_total, 1, cin, kt, dst, pad, convert, r0, r1, dst_row0);
}

// From a channels-first image x_img [C, H, W], every channel (a stem convolution reading the partition's NCHW
// input, rewrites/nchw_stem.cc).
template <typename T, typename Out, typename Convert>
void prepare_nchw_rows(const NhwcConvLayout& l, const T* x_img, int64_t c, int64_t kt, Out* dst, Out pad, Convert convert,
                       int64_t r0, int64_t r1, int64_t dst_row0 = 0) {
  prepare_rows(l, x_img, l.w, 1, l.h * l.w, c, kt, dst, pad, convert, r0, r1, dst_row0);
}

// The attribute of an NhwcConv / NhwcQConv that reads its input channels-first (rewrites/nchw_stem.cc).
constexpr const char* kNchwInputAttr = "nchw_input";

// Such an input's shape [N, C, H, W] as the channels-last [N, H, W, C] it stands for.
inline Shape nchw_as_channels_last(const Shape& x) {
  if (x.size() != 4) throw Error("X " + shape_str(x) + " is not a 2-D channels-first image");
  return {x[0], x[2], x[3], x[1]};
}

// Weights [Cout, Cin/g, kh(, kw)] of group g as a GEMM B of (taps * kt) x cout_g, tap-major, channels
// padded with zeros to kt: b[(t * kt + c) * cout_g + j] = value(W[g * cout_g + j][c][t]).
template <typename T, typename Value>
std::vector<T> conv_weights_as_b(const ConvGeometry& cg, int64_t g, int64_t kt, Value value) {
  const int64_t taps = cg.k_dim() / cg.cin_g, cout_g = cg.cout / cg.group;
  std::vector<T> b(static_cast<size_t>(taps * kt * cout_g), T{0});
  for (int64_t j = 0; j < cout_g; ++j)
    for (int64_t c = 0; c < cg.cin_g; ++c)
      for (int64_t t = 0; t < taps; ++t)
        b[static_cast<size_t>((t * kt + c) * cout_g + j)] = value((((g * cout_g + j) * cg.cin_g) + c) * taps + t);
  return b;
}

// Weights [Cout, Cin, kh, kw] of one group as a GEMM B of (kh * k_row) x cout, by kernel rows: each row's kw
// pixels' cin values in turn, then zeros up to k_row: b[(ky * k_row + kx * cin + c) * cout + j] =
// value(W[j][c][ky][kx]). The K order of a pixel of exactly cin values read a kernel row at a time.
template <typename T, typename Value>
std::vector<T> conv_weights_by_rows(const ConvGeometry& cg, int64_t k_row, Value value) {
  const int64_t kh = cg.wshape[2], kw = cg.wshape[3], cin = cg.cin_g, cout = cg.cout;
  std::vector<T> b(static_cast<size_t>(kh * k_row * cout), T{0});
  for (int64_t j = 0; j < cout; ++j)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx)
          b[static_cast<size_t>((ky * k_row + kx * cin + c) * cout + j)] = value(((j * cin + c) * kh + ky) * kw + kx);
  return b;
}

// Splits rows [0, m) x 16-column panels [0, panels) into tasks of about kMacsPerTask multiply-adds
// (`macs_per_row_panel` each) and runs fn(m0, m1, p0, p1) on the pool; row blocks are multiples of mr,
// panel blocks of np (the kernel's columns / 16: the AVX-512 ones take panels in pairs). input_bytes: what all
// the rows read (the images, or the group's share of them); panel_bytes: one packed weight panel.
void run_conv_gemm_tasks(const RunContext& rc, int64_t m, int64_t panels, int64_t mr, int64_t np, int64_t macs_per_row_panel,
                         double input_bytes, double panel_bytes,
                         const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn);

// Splits output pixels [0, m) of a depthwise convolution into tasks of about kMacsPerTask.
void run_dwconv_tasks(const RunContext& rc, int64_t m, int64_t macs_per_pixel, const std::function<void(int64_t, int64_t)>& fn);

constexpr int64_t kBandSlots = 16;  // scratch slots of a pass in bands: the most threads one pass uses

// Bands of output rows of one image, for a convolution whose tasks each prepare the input rows their band reads
// into a scratch slot of their own and run the GEMM on them at once (float stems, int8 prepared inputs): output
// rows per band (as many as keep the rows they read, row_bytes each, within budget_bytes; at most max_rows),
// bands per image, bands in all, slots.
struct ConvBands {
  int64_t rows = 1, count = 1, items = 1, slots = 1;
};
ConvBands plan_conv_bands(const NhwcConvLayout& l, int64_t row_bytes, int64_t budget_bytes, int64_t max_rows);
// fn(slot, img, oy0, oy1) on every band, over the pool: each slot takes the next band until none is left.
void run_conv_bands(const RunContext& rc, const NhwcConvLayout& l, const ConvBands& b,
                    const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn);

// Prepared inputs per call take at most this much scratch (more images are done in turns).
constexpr int64_t kNhwcPrepBudgetBytes = 16 << 20;

}  // namespace optim
