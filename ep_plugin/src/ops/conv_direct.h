// Direct convolution without im2col, shared by the integer (qconv.cc) and float (conv.cc) Conv: the
// input of each (image, group) is copied once into a padded layout where, for a column stride s, each
// row is split into s column phases, so that every kernel tap of kConvSeg consecutive output pixels of
// one output row reads consecutive values (kernel_table.h, QconvArgs). The copy costs one pass over the
// input where an im2col costs kernel-size passes.
#pragma once

#include <algorithm>
#include <cstring>

#include "conv_common.h"

namespace optim {

using kernels::kConvSeg;

// Prepared input buffers per call take at most this much scratch (more images are done in turns).
constexpr int64_t kPrepBudgetBytes = 8 << 20;

// Where everything lies for one input shape: the prepared input of one (image, group) is cin_g planes
// [padded row][column phase][column / stride], then slack for the kernel's over-reads.
struct DirectLayout : ConvWindow {
  int64_t wq = 1, row_stride = 1, plane = 1, per_image_group = 1;
  int64_t segs_per_row = 1, segs = 1;

  // Only the padded rows and columns some output pixel reads (hp, wp) are prepared.
  DirectLayout(const ConvGeometry& cg, const Shape& x) : ConvWindow(cg, std::vector<int64_t>(x.begin() + 2, x.end())) {
    wq = ceil_div(wp, sw);
    row_stride = sw * wq;
    plane = hp * row_stride;
    per_image_group = (cg.cin_g * plane + kConvSeg + 15) / 16 * 16;  // slack, then 32-byte aligned
    segs_per_row = (ow + kConvSeg - 1) / kConvSeg;
    segs = oh * segs_per_row;
  }
  // Where the kernels' segments of kConvSeg output pixels lie (kernel_table.h).
  kernels::ConvSegments segments() const { return {segs_per_row, ow, sh * row_stride}; }
  // Offset of tap (channel c, ky, kx) from a pixel's segment start.
  int64_t tap(int64_t c, int64_t ky, int64_t kx) const {
    return c * plane + ky * dh * row_stride + ((kx * dw) % sw) * wq + (kx * dw) / sw;
  }
};

// Tap offsets in K order (channel, ky, kx) for `cin_g` channels; `total` >= K, padding taps at 0 (their
// weights are 0).
inline void fill_tap_offsets(const DirectLayout& l, int64_t cin_g, int64_t total, int64_t* tap_off) {
  int64_t k = 0;
  for (int64_t c = 0; c < cin_g; ++c)
    for (int64_t ky = 0; ky < l.kh; ++ky)
      for (int64_t kx = 0; kx < l.kw; ++kx) tap_off[k++] = l.tap(c, ky, kx);
  std::fill(tap_off + k, tap_off + total, int64_t{0});
}

// Images whose prepared inputs (elements of elem_bytes) fit kPrepBudgetBytes together, at least one.
inline int64_t images_per_turn(const DirectLayout& l, int64_t images, int64_t groups, int64_t elem_bytes) {
  const int64_t per_image = groups * l.per_image_group * elem_bytes;
  return std::clamp<int64_t>(kPrepBudgetBytes / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(images, 1));
}

// std::fill, as one memset for bytes (a fill of a byte value the compiler otherwise loops over).
template <typename Out>
inline void fill_run(Out* first, Out* last, Out value) {
  if (last <= first) return;
  if constexpr (sizeof(Out) == 1) std::memset(first, static_cast<unsigned char>(value), static_cast<size_t>(last - first));
  else std::fill(first, last, value);
}

// One channel: padded rows; per row, column phase f holds padded columns f, f + s, f + 2s, ...
// convert(x) is the stored value of an input; padding stores `pad` (the kernel's real 0).
template <typename T, typename Out, typename Convert>
void prepare_plane(const DirectLayout& layout, const T* __restrict x, Out* __restrict dst, Out pad, Convert convert) {
  // Locals, not layout's fields: byte stores could alias them and would force a reload per element.
  const int64_t hp = layout.hp, h = layout.h, w = layout.w, ph = layout.ph, pw = layout.pw, wq = layout.wq;
  const int64_t sw = layout.sw, row_stride = layout.row_stride;
  const int64_t end_col = std::min(layout.wp, pw + w);  // padded columns from here on are not read
  for (int64_t r = 0; r < hp; ++r) {
    Out* __restrict row = dst + r * row_stride;
    const int64_t iy = r - ph;
    if (iy < 0 || iy >= h) {
      fill_run(row, row + row_stride, pad);
      continue;
    }
    const T* __restrict xr = x + iy * w;
    for (int64_t f = 0; f < sw; ++f) {
      Out* __restrict o = row + f * wq;
      // Slots j hold padded column j*s + f, i.e. input column j*s + f - pw: valid for j in [lo, hi).
      const int64_t lo = std::min(wq, ceil_div(std::max<int64_t>(0, pw - f), sw));
      const int64_t hi = std::clamp<int64_t>(ceil_div(std::max<int64_t>(0, end_col - f), sw), lo, wq);
      fill_run(o, o + lo, pad);
      const T* __restrict xs = xr + lo * sw + f - pw;
      const int64_t n = hi - lo;
      if (sw == 1) {
        for (int64_t j = 0; j < n; ++j) o[lo + j] = convert(xs[j]);
      } else if (sw == 2) {
        for (int64_t j = 0; j < n; ++j) o[lo + j] = convert(xs[2 * j]);
      } else {
        for (int64_t j = 0; j < n; ++j) o[lo + j] = convert(xs[j * sw]);
      }
      fill_run(o + hi, o + wq, pad);
    }
  }
}

// The prepared input of one (image, group): its cin_g channel planes (x: the first, planes n_in apart),
// then the slack the kernels read past the last plane (its contents never reach an output).
template <typename T, typename Out, typename Convert>
void prepare_image_group(const DirectLayout& l, int64_t cin_g, const T* x, int64_t n_in, Out* dst, Out pad, Convert convert) {
  for (int64_t c = 0; c < cin_g; ++c) prepare_plane(l, x + c * n_in, dst + c * l.plane, pad, convert);
  fill_run(dst + cin_g * l.plane, dst + l.per_image_group, Out{});
}

// The threading of a direct convolution: per turn of images, prepare(i0, ig) fills the prepared input
// of (image i0 + ig / groups, group ig % groups) and convolve(i0, ig, s0, s1) computes its segments
// [s0, s1). With 4 or more (image, group) pairs each task prepares and convolves its own; otherwise the
// inputs are prepared first and the segments shared out. `macs`: multiply-adds per (image, group).
template <typename Prepare, typename Convolve>
void run_direct(const RunContext& rc, const DirectLayout& l, int64_t images, int64_t groups, int64_t macs, int64_t turn,
                Prepare prepare, Convolve convolve) {
  for (int64_t i0 = 0; i0 < images; i0 += turn) {
    const int64_t igs = (std::min(images, i0 + turn) - i0) * groups;
    if (igs >= 4) {
      const int64_t tasks = std::clamp<int64_t>(macs * igs / kMacsPerTask, 1, igs);
      rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
        for (int64_t ig = static_cast<int64_t>(t); ig < igs; ig += tasks) {
          prepare(i0, ig);
          convolve(i0, ig, int64_t{0}, l.segs);
        }
      });
      continue;
    }
    for (int64_t ig = 0; ig < igs; ++ig) prepare(i0, ig);
    const int64_t chunks = std::clamp<int64_t>(macs / kMacsPerTask, 1, l.segs);
    const int64_t per = (l.segs + chunks - 1) / chunks;
    rc.parallel_for(static_cast<size_t>(igs * chunks), [&](size_t t) {
      const int64_t ig = static_cast<int64_t>(t) / chunks, s0 = static_cast<int64_t>(t) % chunks * per;
      convolve(i0, ig, s0, std::min(l.segs, s0 + per));
    });
  }
}

}  // namespace optim
