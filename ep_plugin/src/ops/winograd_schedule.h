// How the tiles of a Winograd F(2x2, 3x3) convolution go through its three steps on the pool, for the float
// (conv_winograd.cc) and the exact integer (qconv_winograd.cc) convolutions. The output is cut into 2x2 tiles:
// the input transform (each tile's 4x4 input window, a padding row for pixels outside the image, to V), 16 GEMMs
// (V by the transformed weights U) and the output transform with the convolution's epilogue. With U small (up to
// kFusedUBytes) a block of tiles goes through all three while it is hot in one core's L2; threads take blocks
// (and, when there are few, ranges of output channels) from a shared counter, each in a scratch slot of its own.
// With U larger the tiles go in chunks, each step over the whole chunk on all threads, so that U is read once
// per chunk rather than once per block.
// The steps are a Steps object's: In (the input's element type), VElem and MElem (V's and M's), pad_row (fills
// the padding row), input, gemm, output (kernel calls; see run_fused and run_chunked for their arguments) and
// gemm_rows_multiple (the GEMM kernel's rows per tile: a chunk's GEMM tasks take multiples of it).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "conv_nhwc.h"

namespace optim {

// Where tiles [t0, t0 + nt) read their 4x4 input pixels (px, 16 per tile; `pad` for padding) and write their
// 2x2 output pixels (pixel, 4 per tile: the row of C, -1 past the image's edge).
template <class T>
void locate_winograd_tiles(const NhwcConvLayout& l, const T* x, const T* pad, int64_t t0, int64_t nt, const T** px,
                           int64_t* pixel) {
  const int64_t th = (l.oh + 1) / 2, tw = (l.ow + 1) / 2;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t tile = t0 + t, img = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const T* image = x + img * l.h * l.w * l.c;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t iy = ty * 2 + i - l.ph, ix = tx * 2 + j - l.pw;
        const bool inside = iy >= 0 && iy < l.h && ix >= 0 && ix < l.w;
        px[t * 16 + i * 4 + j] = inside ? image + (iy * l.w + ix) * l.c : pad;
      }
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t oy = ty * 2 + i, ox = tx * 2 + j;
        pixel[t * 4 + i * 2 + j] = oy < l.oh && ox < l.ow ? (img * l.oh + oy) * l.ow + ox : -1;
      }
  }
}

class WinogradSchedule {
 public:
  // cin: the input's channels (the padding row's length); k: V's values per tile and position (cin padded to the
  // GEMM's K multiple); v_bytes: one value of V; in_bytes: one input value.
  WinogradSchedule(int64_t cin, int64_t k, int64_t cout, int64_t v_bytes, int64_t in_bytes)
      : cin_(cin), k_(k), cout_(cout), v_bytes_(v_bytes), in_bytes_(in_bytes), chunked_(16 * k * cout * v_bytes > kFusedUBytes) {}

  static int64_t tiles(const NhwcConvLayout& l) { return l.n * ((l.oh + 1) / 2) * ((l.ow + 1) / 2); }
  size_t scratch_bytes(const NhwcConvLayout& l) const {
    if (chunked_) return pad_row_bytes() + slot_bytes(chunk_tiles(l));  // one chunk's V, M, pixel pointers and rows
    const Split s = split(l);
    return pad_row_bytes() + static_cast<size_t>(s.slots) * slot_bytes(s.per_block);
  }
  // Calls fn(m0, m1) for each run of consecutive rows of C (output pixels) that tiles [t0, t0 + nt) write: per
  // row of tiles they cover, its one or two output rows' pixels under those tiles.
  template <class Fn>
  static void output_runs(const NhwcConvLayout& l, int64_t t0, int64_t nt, const Fn& fn) {
    const int64_t tw = (l.ow + 1) / 2, th = (l.oh + 1) / 2;
    for (int64_t t = t0; t < t0 + nt;) {
      const int64_t tile_row = t / tw, tx0 = t % tw, tx1 = std::min(tw, tx0 + (t0 + nt - t));
      const int64_t img = tile_row / th, oy0 = tile_row % th * 2;
      for (int64_t oy = oy0; oy < std::min(l.oh, oy0 + 2); ++oy) {
        const int64_t row = (img * l.oh + oy) * l.ow;
        fn(row + tx0 * 2, row + std::min(l.ow, tx1 * 2));
      }
      t += tx1 - tx0;
    }
  }

  template <class Steps>
  void run(const RunContext& rc, const NhwcConvLayout& l, const typename Steps::In* x, void* scratch, const Steps& s) const {
    if (tiles(l) == 0) return;
    auto* pad = static_cast<typename Steps::In*>(scratch);
    s.pad_row(pad, cin_);
    uint8_t* slots = static_cast<uint8_t*>(scratch) + pad_row_bytes();
    if (chunked_) run_chunked(rc, l, x, pad, slots, s);
    else run_fused(rc, l, x, pad, slots, s);
  }

 private:
  static constexpr int64_t kSlots = 16;               // scratch slots: the most threads one convolution uses
  static constexpr int64_t kBlockBytes = 384 << 10;   // V and M of one block: within L2 (512 KB on the smallest seen)
  static constexpr int64_t kMinWorkItems = 8;         // fewer tile blocks than this: split output channels too
  // Fused blocks read all of U once per block of tiles, which costs nothing while U stays in L2 and is the whole
  // time when it does not (512 -> 512 float channels: 16 MB of U for each block of 8 tiles, 4 multiply-adds per
  // float read: slower than the direct convolution). Above this size the tiles go in chunks instead.
  static constexpr int64_t kFusedUBytes = 1 << 20;
  static constexpr int64_t kChunkBytes = 8 << 20;     // V and M of one chunk (the GEMMs read them from L2 and L3)
  static constexpr int64_t kTransformTiles = 16;      // tiles per task of a chunk's transforms
  static constexpr int64_t kGemmRowBytes = 256 << 10; // A rows (of V) per GEMM task: within L2
  static constexpr int64_t kMBytes = 4;               // M's elements: float or int32

  // How one call's tiles are shared out: blocks of tiles, each maybe cut into ranges of output channels.
  struct Split {
    int64_t tiles = 0, per_block = 0, blocks = 0, ranges = 1, panel_step = 1, items = 0, slots = 1;
  };
  int64_t tile_bytes() const { return 16 * (k_ * v_bytes_ + cout_ * kMBytes); }  // V and M of one tile
  size_t pad_row_bytes() const { return (static_cast<size_t>(cin_ * in_bytes_) + 63) / 64 * 64; }

  Split split(const NhwcConvLayout& l) const {
    Split s;
    s.tiles = tiles(l);
    s.per_block = std::clamp<int64_t>(kBlockBytes / tile_bytes() / 8 * 8, 8, 128);
    s.blocks = (s.tiles + s.per_block - 1) / s.per_block;
    // Few blocks (small images): each also takes a range of output channels (its input transform is then
    // done once per range, a small cost next to the GEMMs).
    const int64_t panels = (cout_ + 15) / 16;
    s.ranges = std::clamp<int64_t>((kMinWorkItems + s.blocks - 1) / std::max<int64_t>(s.blocks, 1), 1, (panels + 1) / 2);
    s.panel_step = (panels + s.ranges - 1) / s.ranges;
    s.items = s.blocks * s.ranges;
    s.slots = std::clamp<int64_t>(s.items, 1, kSlots);
    return s;
  }
  int64_t chunk_tiles(const NhwcConvLayout& l) const {
    return std::clamp<int64_t>(kChunkBytes / tile_bytes(), 1, std::max<int64_t>(tiles(l), 1));
  }

  // One slot: V (16 x tiles x k), M (16 x tiles x Cout), the tiles' input pixels (16 each) and output rows (4).
  size_t slot_bytes(int64_t tiles) const {
    return static_cast<size_t>((tiles * tile_bytes() + tiles * 16 * static_cast<int64_t>(sizeof(void*)) +
                                tiles * 4 * static_cast<int64_t>(sizeof(int64_t)) + 63) / 64 * 64);
  }
  template <class Steps>
  struct Slot {
    typename Steps::VElem* v;
    typename Steps::MElem* m;
    const typename Steps::In** px;
    int64_t* pixel;
  };
  template <class Steps>
  Slot<Steps> slot_at(uint8_t* base, int64_t tiles) const {
    Slot<Steps> s;
    s.v = reinterpret_cast<typename Steps::VElem*>(base);
    s.m = reinterpret_cast<typename Steps::MElem*>(base + 16 * tiles * k_ * v_bytes_);
    s.px = reinterpret_cast<const typename Steps::In**>(s.m + 16 * tiles * cout_);
    s.pixel = reinterpret_cast<int64_t*>(s.px + tiles * 16);
    return s;
  }

  template <class Steps>
  void run_fused(const RunContext& rc, const NhwcConvLayout& l, const typename Steps::In* x, const typename Steps::In* pad,
                 uint8_t* slots, const Steps& s) const {
    const Split sp = split(l);
    const int64_t per_block = sp.per_block, panels = (cout_ + 15) / 16;
    std::atomic<int64_t> next{0};
    rc.parallel_for(static_cast<size_t>(sp.slots), [&](size_t slot) {
      const Slot<Steps> b = slot_at<Steps>(slots + slot * slot_bytes(per_block), per_block);
      for (int64_t item; (item = next.fetch_add(1)) < sp.items;) {
        const int64_t t0 = item / sp.ranges * per_block, nt = std::min(per_block, sp.tiles - t0);
        const int64_t p0 = item % sp.ranges * sp.panel_step, p1 = std::min(panels, p0 + sp.panel_step);
        if (p0 >= p1) continue;
        locate_winograd_tiles(l, x, pad, t0, nt, b.px, b.pixel);
        s.input(rc, b.px, nt, b.v, per_block * k_);
        for (int64_t pos = 0; pos < 16; ++pos)
          s.gemm(rc, pos, 0, nt, nt, p0, p1, b.v + pos * per_block * k_, b.m + pos * per_block * cout_);
        const int64_t j0 = p0 * 16;
        s.output(rc, l, b.m, per_block * cout_, t0, nt, b.pixel, j0, std::min(cout_, p1 * 16) - j0);
      }
    });
  }

  template <class Steps>
  void run_chunked(const RunContext& rc, const NhwcConvLayout& l, const typename Steps::In* x, const typename Steps::In* pad,
                   uint8_t* base, const Steps& s) const {
    const int64_t total = tiles(l), chunk = chunk_tiles(l), panels = (cout_ + 15) / 16, per_task = kTransformTiles;
    const Slot<Steps> b = slot_at<Steps>(base, chunk);
    const int64_t mr = std::max<int64_t>(s.gemm_rows_multiple(rc), 1);
    const int64_t rows_per_task = std::max<int64_t>(mr, kGemmRowBytes / (k_ * v_bytes_) / mr * mr);
    constexpr int64_t kPanelsPerTask = 4;
    for (int64_t c0 = 0; c0 < total; c0 += chunk) {
      const int64_t nt = std::min(chunk, total - c0), blocks = (nt + per_task - 1) / per_task;
      rc.parallel_for(static_cast<size_t>(blocks), [&](size_t i) {
        const int64_t t0 = static_cast<int64_t>(i) * per_task, bt = std::min(per_task, nt - t0);
        locate_winograd_tiles(l, x, pad, c0 + t0, bt, b.px + t0 * 16, b.pixel + t0 * 4);
        s.input(rc, b.px + t0 * 16, bt, b.v + t0 * k_, chunk * k_);
      });
      // The 16 GEMMs (tiles x k) x (k x Cout) as one set of tasks: rows of V by groups of U's panels.
      const int64_t m_tasks = (nt + rows_per_task - 1) / rows_per_task, p_tasks = (panels + kPanelsPerTask - 1) / kPanelsPerTask;
      rc.parallel_for(static_cast<size_t>(16 * m_tasks * p_tasks), [&](size_t item) {
        const int64_t i = static_cast<int64_t>(item), pos = i / (m_tasks * p_tasks), pt = i / m_tasks % p_tasks, mt = i % m_tasks;
        const int64_t m0 = mt * rows_per_task, p0 = pt * kPanelsPerTask;
        s.gemm(rc, pos, m0, std::min(nt, m0 + rows_per_task), nt, p0, std::min(panels, p0 + kPanelsPerTask),
               b.v + pos * chunk * k_, b.m + pos * chunk * cout_);
      });
      rc.parallel_for(static_cast<size_t>(blocks), [&](size_t i) {
        const int64_t t0 = static_cast<int64_t>(i) * per_task, bt = std::min(per_task, nt - t0);
        s.output(rc, l, b.m + t0 * cout_, chunk * cout_, c0 + t0, bt, b.pixel + t0 * 4, 0, cout_);
      });
    }
  }

  int64_t cin_ = 0, k_ = 0, cout_ = 0, v_bytes_ = 4, in_bytes_ = 4;
  bool chunked_ = false;
};

}  // namespace optim
