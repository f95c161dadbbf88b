// The shared machinery of the channels-last convolutions (conv_nhwc.h): output shapes, the input layout, and the
// task and band splits that the float op (conv_nhwc_op.cc), its folded stages and the int8 units run on.
#include <atomic>
#include <cmath>

#include "conv_nhwc.h"

namespace optim {

Shape nhwc_conv_output_shape(const ConvGeometry& cg, const Shape& x) {
  if (x.size() != cg.spatial + 2) throw Error("X " + shape_str(x) + " does not match weights " + shape_str(cg.wshape));
  if (x.back() != cg.cin_g * cg.group)
    throw Error("X " + shape_str(x) + " (channels last) has " + std::to_string(x.back()) + " channels, weights " +
                shape_str(cg.wshape) + " with group " + std::to_string(cg.group) + " expect " +
                std::to_string(cg.cin_g * cg.group));
  const WindowGeometry geo = resolve_window(cg.win, std::vector<int64_t>(x.begin() + 1, x.end() - 1));
  Shape out{x[0]};
  out.insert(out.end(), geo.out.begin(), geo.out.end());
  out.push_back(cg.cout);
  return out;
}

NhwcConvLayout::NhwcConvLayout(const ConvGeometry& cg, const Shape& x)
    : ConvWindow(cg, std::vector<int64_t>(x.begin() + 1, x.end() - 1)) {
  n = x[0];
  c = x.back();
  reads_padding = ph > 0 || pw > 0 || hp > h || wp > w;
}

NhwcConvLayout::Taps NhwcConvLayout::taps(int64_t cs, int64_t kt, int64_t row_pixels) const {
  Taps t;
  const bool rows = cs == kt && dw == 1;
  t.count = rows ? kh : kh * kw;
  t.k_tap = rows ? kw * kt : kt;
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < (rows ? 1 : kw); ++kx) t.offsets.push_back((ky * dh * row_pixels + kx * dw) * cs);
  return t;
}

kernels::DwconvGeometry NhwcConvLayout::depthwise(int64_t channels) const {
  kernels::DwconvGeometry g;
  g.h = h, g.w = w, g.oh = oh, g.ow = ow, g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw, g.dh = dh, g.dw = dw;
  g.ph = ph, g.pw = pw, g.cs = c, g.channels = channels;
  return g;
}

void run_conv_gemm_tasks(const RunContext& rc, int64_t m, int64_t panels, int64_t mr, int64_t np, int64_t macs_per_row_panel,
                         double input_bytes, double panel_bytes,
                         const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn) {
  if (m <= 0 || panels <= 0) return;
  const double macs = static_cast<double>(m) * static_cast<double>(panels) * static_cast<double>(macs_per_row_panel);
  const int64_t wanted = static_cast<int64_t>(std::clamp(macs / kMacsPerTask, 1.0, 64.0));
  np = std::max<int64_t>(1, np);
  const int64_t m_units = (m + mr - 1) / mr, p_units = (panels + np - 1) / np;
  // Each block of rows reads the weights of its panels, each block of panels the input its rows read: of
  // the grids of kMinTasks to `wanted` tasks, take one that moves at most 10% more bytes than the fewest,
  // with as many tasks as it can (the threads finish together). Early layers (large images, small weights)
  // split the pixels; late ones (7x7 or 14x14 images, megabytes of weights) split the panels too, or every
  // task would stream all the weights from L3 for a few pixels (two threads then wait on L3).
  constexpr int64_t kMinTasks = 16;
  const double weight_bytes = static_cast<double>(panels) * panel_bytes;
  const int64_t least = std::min(wanted, kMinTasks);
  auto rows_range = [&](int64_t p) {  // row blocks [lo, hi] that give p panel blocks least..wanted tasks
    const int64_t hi = std::min(m_units, std::max<int64_t>(1, wanted / p));
    return std::make_pair(std::min(hi, std::max<int64_t>(1, (least + p - 1) / p)), hi);
  };
  auto bytes = [&](int64_t r, int64_t p) { return static_cast<double>(r) * weight_bytes + static_cast<double>(p) * input_bytes; };
  double fewest = -1;
  for (int64_t p = 1; p <= std::min(p_units, wanted); ++p) {
    const double b = bytes(rows_range(p).first, p);
    if (fewest < 0 || b < fewest) fewest = b;
  }
  int64_t mb = 1, pb = 1;
  for (int64_t p = 1; p <= std::min(p_units, wanted); ++p) {
    auto [lo, hi] = rows_range(p);
    if (bytes(lo, p) > 1.1 * fewest) continue;
    const int64_t r = std::clamp<int64_t>(static_cast<int64_t>((1.1 * fewest - static_cast<double>(p) * input_bytes) /
                                                               std::max(weight_bytes, 1.0)), lo, hi);
    if (r * p > mb * pb) mb = r, pb = p;
  }
  // An even number of tasks (seven on two threads: one waits a seventh of the time), each of the grid's rows and
  // columns an even share of the units (not ceil-sized steps and a short last one).
  if (mb * pb > 1 && (mb * pb) % 2 == 1) {
    if (pb < std::min(p_units, wanted)) ++pb;
    else if (mb < m_units) ++mb;
  }
  rc.parallel_for(static_cast<size_t>(mb * pb), [&](size_t t) {
    const int64_t i = static_cast<int64_t>(t) / pb, j = static_cast<int64_t>(t) % pb;
    const int64_t m0 = i * m_units / mb * mr, m1 = std::min(m, (i + 1) * m_units / mb * mr);
    const int64_t p0 = j * p_units / pb * np, p1 = std::min(panels, (j + 1) * p_units / pb * np);
    if (m0 < m1 && p0 < p1) fn(m0, m1, p0, p1);
  });
}

void run_dwconv_tasks(const RunContext& rc, int64_t m, int64_t macs_per_pixel, const std::function<void(int64_t, int64_t)>& fn) {
  if (m <= 0) return;
  // Depthwise work is memory-bound: a task pays off at a quarter of the multiply-adds of a dense one.
  const double macs = static_cast<double>(m) * static_cast<double>(macs_per_pixel);
  const int64_t tasks = std::min<int64_t>(m, static_cast<int64_t>(std::clamp(4.0 * macs / kMacsPerTask, 1.0, 64.0)));
  const int64_t step = (m + tasks - 1) / tasks;
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t m0 = static_cast<int64_t>(t) * step;
    if (m0 < m) fn(m0, std::min(m, m0 + step));
  });
}

ConvBands plan_conv_bands(const NhwcConvLayout& l, int64_t row_bytes, int64_t budget_bytes, int64_t max_rows) {
  ConvBands b;
  const int64_t most = std::min(l.oh, max_rows);
  while (b.rows < most && l.rows_read(b.rows + 1) * row_bytes <= budget_bytes) ++b.rows;
  b.count = (l.oh + b.rows - 1) / b.rows;
  b.items = l.n * b.count;
  b.slots = std::clamp<int64_t>(b.items, 1, kBandSlots);
  return b;
}

void run_conv_bands(const RunContext& rc, const NhwcConvLayout& l, const ConvBands& b,
                    const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn) {
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(b.slots), [&](size_t slot) {
    for (int64_t item; (item = next.fetch_add(1)) < b.items;) {
      const int64_t img = item / b.count, oy0 = item % b.count * b.rows;
      fn(static_cast<int64_t>(slot), img, oy0, std::min(l.oh, oy0 + b.rows));
    }
  });
}

}  // namespace optim
