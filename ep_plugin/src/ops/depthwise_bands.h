// How a depthwise convolution with the 1x1 expansion before it folded in (conv_dw_pw.h: float32,
// qconv_block.h: int8) is cut into bands of output rows of one image, so that the expanded rows a band reads
// are made into a buffer of its thread and used while in cache. Consecutive bands share input rows (a 3x3
// stride-1 kernel: two): a run of bands makes them once and keeps them in its buffer (BandRows).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "conv_nhwc.h"

namespace optim {

constexpr int64_t kBandBytes = 256 << 10;    // what one band holds: its input rows and its output tile
constexpr int64_t kBandMinItems = 4;         // runs of bands per call at least (threads share them)

struct DepthwiseBands {
  int64_t rows = 1;              // output rows per band at most
  int64_t oh = 1, runs = 1;      // output rows per image, runs of consecutive bands per image
  int64_t items = 1, slots = 1;  // runs in all, scratch slots
  int64_t in_rows = 1;           // input rows one band reads at most
  int64_t h = 1, sh = 1, ph = 0, shared = 0;  // input rows, stride, padding, rows two neighbouring bands both read
  // The first output row of run `run` of an image. The runs share out the input rows evenly (each run expands the
  // rows it reads, most of its work), less half the rows two runs both read: a 5x5 stride-2 depthwise over 14 rows in
  // two runs reads 9 + 8 rows (output rows 0-3, 4-6), where halving the output rows read 7 + 10 (0-2, 3-6).
  int64_t run_start(int64_t run) const {
    if (run <= 0) return 0;
    if (run >= runs) return oh;
    const double in_row = static_cast<double>(run * h) / static_cast<double>(runs) - 0.5 * static_cast<double>(shared);
    return std::clamp<int64_t>(std::llround((in_row + static_cast<double>(ph)) / static_cast<double>(sh)), 0, oh);
  }
  // body(img, oy0, oy1) on each band of item `item` (a run, cut into bands of at most `rows` rows), in order.
  template <typename Body>
  void for_each_band(int64_t item, const Body& body) const {
    const int64_t img = item / runs, run = item % runs;
    const int64_t first = run_start(run), end = std::max(first, run_start(run + 1));
    for (int64_t oy = first; oy < end; oy += rows) body(img, oy, std::min(end, oy + rows));
  }
};

// The input rows [first, end) inside the image that output rows [oy0, oy1) read.
inline std::pair<int64_t, int64_t> depthwise_input_rows(const NhwcConvLayout& l, int64_t oy0, int64_t oy1) {
  const int64_t r0 = std::clamp<int64_t>(oy0 * l.sh - l.ph, 0, l.h);
  return {r0, std::clamp<int64_t>(oy0 * l.sh - l.ph + l.rows_read(oy1 - oy0), r0, l.h)};
}

// in_pixel_bytes / out_pixel_bytes: what a band keeps per input pixel it reads and per output pixel it makes.
inline DepthwiseBands plan_depthwise_bands(const NhwcConvLayout& l, int64_t in_pixel_bytes, int64_t out_pixel_bytes) {
  auto bytes = [&](int64_t r) { return l.rows_read(r) * l.w * in_pixel_bytes + r * l.ow * out_pixel_bytes; };
  DepthwiseBands b;
  while (b.rows < l.oh && bytes(b.rows + 1) <= kBandBytes) ++b.rows;
  const int64_t bands = (l.oh + b.rows - 1) / b.rows;  // per image, at most rows each
  b.oh = l.oh;
  // Runs short enough for every thread to get some at batch 1, but each run after the first expands the rows
  // it shares with the one before again: fewer runs (at least two) where that would pass a quarter of the
  // image's rows (a 5x5 stride-2 depthwise over 14 rows). Halved rather than decremented, so that the runs
  // share out evenly over two or four threads (three runs on two threads: one waits a third of the time).
  b.runs = std::clamp<int64_t>((kBandMinItems + l.n - 1) / l.n, 1, bands);
  const int64_t shared = std::max<int64_t>(0, (l.kh - 1) * l.dh + 1 - l.sh);  // input rows two bands both read
  while (b.runs > 2 && (b.runs - 1) * shared * 4 > l.h) b.runs = std::max<int64_t>(2, b.runs / 2);
  b.items = l.n * b.runs;
  b.h = l.h, b.sh = l.sh, b.ph = l.ph, b.shared = shared;
  b.slots = std::clamp<int64_t>(b.items, 1, kBandSlots);
  b.in_rows = std::min(l.h, l.rows_read(b.rows));
  return b;
}

// The input rows a thread's band buffer holds. The buffer has room for kBandCapacity bands' rows: the next
// band's rows go after the ones held while they fit, and only then are the rows it shares with the band before
// moved to the buffer's start (a 3x3 stride-1 band shares two rows: moved every other band, not every band).
constexpr int64_t kBandCapacity = 2;

struct BandRows {
  int64_t have0 = 0, have1 = 0, at = 0;  // rows [have0, have1) held from buffer row `at`
  // For the next band, reading rows [r0, r1) (of the same image, after the last band's), in a buffer of
  // `capacity` rows of row_elems values: where row r0 lies, and the first row still to make.
  template <typename T>
  std::pair<T*, int64_t> place(T* buf, int64_t row_elems, int64_t capacity, int64_t r0, int64_t r1) {
    const int64_t kept = std::max<int64_t>(0, std::min(have1, r1) - std::max(have0, r0));
    int64_t start = kept > 0 ? at + (r0 - have0) : 0;
    if (start + (r1 - r0) > capacity) {
      if (kept > 0) std::memmove(buf, buf + start * row_elems, static_cast<size_t>(kept * row_elems) * sizeof(T));
      start = 0;
    }
    have0 = r0, have1 = r1, at = start;
    return {buf + start * row_elems, r0 + kept};
  }
};

// The band's input rows [r0, r1) as an image of their own and its output rows [oy0, oy1) as rows from 0:
// rows above the band are padding to the kernel, as are the image's.
inline kernels::DwconvGeometry band_geometry(const NhwcConvLayout& l, int64_t channels, int64_t r0, int64_t r1,
                                             int64_t oy0, int64_t oy1) {
  kernels::DwconvGeometry g = l.depthwise(channels);
  g.h = r1 - r0;
  g.oh = oy1 - oy0;
  g.ph = l.ph + r0 - oy0 * l.sh;
  return g;
}

}  // namespace optim
