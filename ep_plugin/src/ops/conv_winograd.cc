// Winograd F(2x2, 3x3) (conv_winograd.h). The output is cut into 2x2 tiles, which go through three steps: the
// input transform (kernels' winograd_input_f32: each tile's 4x4 input window, zeros for padding, to V), 16 GEMMs
// (the sgemm kernels on U packed at compile time) and the output transform with the convolution's epilogue
// (winograd_output_f32). With U small (up to 128 -> 128 channels) a block of tiles goes through all three while
// it is hot in one core's L2; threads take blocks (and, when there are few, ranges of output channels) from a
// shared counter, each in a scratch slot of its own. With U larger the tiles go in chunks, each step over the
// whole chunk on all threads, so that U is read once per chunk rather than once per block.
#include "conv_winograd.h"

#include <algorithm>
#include <atomic>

#include "sgemm_driver.h"

namespace optim {

namespace {

constexpr int64_t kSlots = 16;               // scratch slots: the most threads one convolution uses
constexpr int64_t kBlockBytes = 384 << 10;   // V and M of one block: within L2 (512 KB on the smallest seen)
constexpr int64_t kMinWorkItems = 8;         // fewer tile blocks than this: split output channels too
// Fused blocks read all of U once per block of tiles, which costs nothing while U stays in L2 and is the whole
// time when it does not (512 -> 512 channels: 16 MB of U for each block of 8 tiles, 4 multiply-adds per float
// read: slower than the direct convolution). Above this size the tiles go in chunks instead.
constexpr int64_t kFusedUBytes = 1 << 20;
constexpr int64_t kChunkBytes = 8 << 20;     // V and M of one chunk (the GEMMs read them from L2 and L3)
constexpr int64_t kTransformTiles = 16;      // tiles per task of a chunk's transforms
constexpr int64_t kGemmRowBytes = 256 << 10; // A rows (of V) per GEMM task: within L2

// Where tiles [t0, t0 + nt) read their 4x4 input pixels (px, 16 per tile; `zeros` for padding) and write their
// 2x2 output pixels (pixel, 4 per tile: the row of C, -1 past the image's edge).
void locate_tiles(const NhwcConvLayout& l, const float* x, const float* zeros, int64_t t0, int64_t nt,
                  const float** px, int64_t* pixel) {
  const int64_t th = (l.oh + 1) / 2, tw = (l.ow + 1) / 2;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t tile = t0 + t, img = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const float* image = x + img * l.h * l.w * l.c;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t iy = ty * 2 + i - l.ph, ix = tx * 2 + j - l.pw;
        const bool inside = iy >= 0 && iy < l.h && ix >= 0 && ix < l.w;
        px[t * 16 + i * 4 + j] = inside ? image + (iy * l.w + ix) * l.c : zeros;
      }
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t oy = ty * 2 + i, ox = tx * 2 + j;
        pixel[t * 4 + i * 2 + j] = oy < l.oh && ox < l.ow ? (img * l.oh + oy) * l.ow + ox : -1;
      }
  }
}

}  // namespace

WinogradF23::WinogradF23(const ConvGeometry& cg)
    : cin_(cg.cin_g), cout_(cg.cout), chunked_(16 * cg.cin_g * cg.cout * static_cast<int64_t>(sizeof(float)) > kFusedUBytes) {}

bool WinogradF23::suits(const ConvGeometry& cg) {
  return cg.spatial == 2 && cg.group == 1 && cg.wshape[2] == 3 && cg.wshape[3] == 3 && cg.win.strides[0] == 1 &&
         cg.win.strides[1] == 1 && cg.win.dilations[0] == 1 && cg.win.dilations[1] == 1;
}

void WinogradF23::prepare(const float* weights) {
  // U = G g Gt, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: summed in double, rounded to float once.
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::vector<float> b(static_cast<size_t>(16 * cin_ * cout_));  // per position: Cin x Cout
  for (int64_t o = 0; o < cout_; ++o)
    for (int64_t i = 0; i < cin_; ++i) {
      const float* g = weights + (o * cin_ + i) * 9;
      double gt[3][4];  // g Gt
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 4; ++q) gt[r][q] = g[r * 3] * G[q][0] + g[r * 3 + 1] * G[q][1] + g[r * 3 + 2] * G[q][2];
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 4; ++q)
          b[static_cast<size_t>(((p * 4 + q) * cin_ + i) * cout_ + o)] =
              static_cast<float>(G[p][0] * gt[0][q] + G[p][1] * gt[1][q] + G[p][2] * gt[2][q]);
    }
  u_floats_ = kernels::sgemm_packed_b_floats(cin_, cout_);
  u_.resize(16 * u_floats_);
  for (int64_t pos = 0; pos < 16; ++pos)
    kernels::sgemm_pack_b(b.data() + pos * cin_ * cout_, cout_, false, cin_, cout_, u_.data() + pos * u_floats_);
}

WinogradF23::Split WinogradF23::split(const NhwcConvLayout& l) const {
  Split s;
  s.tiles = tiles(l);
  s.per_block = std::clamp<int64_t>(kBlockBytes / (16 * static_cast<int64_t>(sizeof(float)) * (cin_ + cout_)) / 8 * 8, 8, 128);
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

// One slot: V (16 x tiles x Cin), M (16 x tiles x Cout), the tiles' input pixels (16 each) and output rows (4).
size_t WinogradF23::slot_bytes(int64_t per_block) const {
  const size_t floats = static_cast<size_t>(16 * per_block * (cin_ + cout_));
  return (floats * sizeof(float) + static_cast<size_t>(per_block * 16) * sizeof(float*) +
          static_cast<size_t>(per_block * 4) * sizeof(int64_t) + 63) / 64 * 64;
}

WinogradF23::Slot WinogradF23::slot_at(uint8_t* base, int64_t tiles) const {
  Slot s;
  s.v = reinterpret_cast<float*>(base);
  s.m = s.v + 16 * tiles * cin_;
  s.px = reinterpret_cast<const float**>(s.m + 16 * tiles * cout_);
  s.pixel = reinterpret_cast<int64_t*>(s.px + tiles * 16);
  return s;
}

int64_t WinogradF23::chunk_tiles(const NhwcConvLayout& l) const {
  const int64_t fit = kChunkBytes / (16 * static_cast<int64_t>(sizeof(float)) * (cin_ + cout_));
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(tiles(l), 1));
}

size_t WinogradF23::scratch_bytes(const NhwcConvLayout& l) const {
  if (chunked_) {  // one chunk's V, M, input pixel pointers and output rows
    return zero_row_bytes() + slot_bytes(chunk_tiles(l));
  }
  const Split s = split(l);
  return zero_row_bytes() + static_cast<size_t>(s.slots) * slot_bytes(s.per_block);
}

void WinogradF23::run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                      const kernels::ConvF32Epilogue& ep, void* scratch) const {
  if (tiles(l) == 0) return;
  if (chunked_) return run_chunked(rc, l, x, y, ep, scratch);
  run_fused(rc, l, x, y, ep, scratch);
}

void WinogradF23::run_chunked(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                              const kernels::ConvF32Epilogue& ep, void* scratch) const {
  const int64_t total = tiles(l), chunk = chunk_tiles(l), panels = (cout_ + 15) / 16;
  auto* zeros = static_cast<float*>(scratch);
  std::fill(zeros, zeros + cin_, 0.f);
  const Slot s = slot_at(static_cast<uint8_t*>(scratch) + zero_row_bytes(), chunk);
  float* v = s.v;
  float* m = s.m;
  const float** px = s.px;
  int64_t* pixel = s.pixel;
  const kernels::SgemmEpilogue plain;
  const int64_t mr = std::max<int64_t>(rc.kernels.sgemm.traits.mr, 1);
  const int64_t rows_per_task = std::max<int64_t>(mr, kGemmRowBytes / (cin_ * static_cast<int64_t>(sizeof(float))) / mr * mr);
  constexpr int64_t kPanelsPerTask = 4;
  for (int64_t c0 = 0; c0 < total; c0 += chunk) {
    const int64_t nt = std::min(chunk, total - c0), blocks = (nt + kTransformTiles - 1) / kTransformTiles;
    rc.parallel_for(static_cast<size_t>(blocks), [&](size_t b) {
      const int64_t t0 = static_cast<int64_t>(b) * kTransformTiles, bt = std::min(kTransformTiles, nt - t0);
      locate_tiles(l, x, zeros, c0 + t0, bt, px + t0 * 16, pixel + t0 * 4);
      rc.kernels.winograd_input_f32(px + t0 * 16, bt, cin_, v + t0 * cin_, chunk * cin_, cin_);
    });
    // The 16 GEMMs (tiles x Cin) x (Cin x Cout) as one set of tasks: rows of V by groups of U's panels.
    const int64_t m_tasks = (nt + rows_per_task - 1) / rows_per_task, p_tasks = (panels + kPanelsPerTask - 1) / kPanelsPerTask;
    rc.parallel_for(static_cast<size_t>(16 * m_tasks * p_tasks), [&](size_t item) {
      const int64_t i = static_cast<int64_t>(item), pos = i / (m_tasks * p_tasks), pt = i / m_tasks % p_tasks, mt = i % m_tasks;
      const int64_t m0 = mt * rows_per_task, p0 = pt * kPanelsPerTask;
      rc.kernels.sgemm(m0, std::min(nt, m0 + rows_per_task), p0, std::min(panels, p0 + kPanelsPerTask), cout_, cin_,
                       v + pos * chunk * cin_, cin_, u_.data() + pos * u_floats_, m + pos * chunk * cout_, cout_, plain);
    });
    rc.parallel_for(static_cast<size_t>(blocks), [&](size_t b) {
      const int64_t t0 = static_cast<int64_t>(b) * kTransformTiles, bt = std::min(kTransformTiles, nt - t0);
      rc.kernels.winograd_output_f32(m + t0 * cout_, chunk * cout_, cout_, bt, cout_, pixel + t0 * 4, y, cout_, 0, ep);
    });
  }
}

void WinogradF23::run_fused(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                            const kernels::ConvF32Epilogue& ep, void* scratch) const {
  const Split sp = split(l);
  const int64_t per_block = sp.per_block, panels = (cout_ + 15) / 16;
  auto* zeros = static_cast<float*>(scratch);
  std::fill(zeros, zeros + cin_, 0.f);
  uint8_t* slots = static_cast<uint8_t*>(scratch) + zero_row_bytes();
  const kernels::SgemmEpilogue plain;
  std::atomic<int64_t> next{0};
  rc.parallel_for(static_cast<size_t>(sp.slots), [&](size_t slot) {
    const auto [v, m, px, pixel] = slot_at(slots + slot * slot_bytes(per_block), per_block);
    for (int64_t item; (item = next.fetch_add(1)) < sp.items;) {
      const int64_t t0 = item / sp.ranges * per_block, nt = std::min(per_block, sp.tiles - t0);
      const int64_t p0 = item % sp.ranges * sp.panel_step, p1 = std::min(panels, p0 + sp.panel_step);
      if (p0 >= p1) continue;
      locate_tiles(l, x, zeros, t0, nt, px, pixel);
      rc.kernels.winograd_input_f32(px, nt, cin_, v, per_block * cin_, cin_);
      for (int64_t pos = 0; pos < 16; ++pos)
        rc.kernels.sgemm(0, nt, p0, p1, cout_, cin_, v + pos * per_block * cin_, cin_, u_.data() + pos * u_floats_,
                         m + pos * per_block * cout_, cout_, plain);
      const int64_t j0 = p0 * 16, cols = std::min(cout_, p1 * 16) - j0;
      rc.kernels.winograd_output_f32(m + j0, per_block * cout_, cout_, nt, cols, pixel, y, cout_, j0, ep);
    }
  });
}

}  // namespace optim
